package config

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// `crewlet config import` on the files the three clients keep: every
// server carried over as an mcp_servers entry the company file accepts,
// each literal credential lifted into the secrets behind a ${NAME}
// reference and out of the YAML, the clients' own variables converted.
func TestImportClientConfigs(t *testing.T) {
	for _, tc := range []struct {
		file    string
		servers []string
		secrets map[string]string
		yaml    []string // must appear
		notes   []string
		asked   []Asked
	}{
		{
			file:    "claude_desktop_config.json",
			servers: []string{"filesystem", "github"},
			secrets: map[string]string{"GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_literalSecretValue0123456789abcdef"},
			yaml:    []string{"GITHUB_PERSONAL_ACCESS_TOKEN: ${GITHUB_GITHUB_PERSONAL_ACCESS_TOKEN}", "GITHUB_TOOLSETS: repos,issues", "/Users/ada/Desktop"},
			notes:   []string{`"GitHub" is named github`, "old-thing was disabled"},
		},
		{
			file:    "cursor_mcp.json",
			servers: []string{"linear", "search", "weather"},
			secrets: map[string]string{"LINEAR_HEADER_AUTHORIZATION": "lin_api_literalValue42", "SEARCH_ARG_API_KEY": "sk-literal-search-key-777", "WEATHER_URL_APIKEY": "w3ather-literal"},
			yaml:    []string{"Authorization: Bearer ${LINEAR_HEADER_AUTHORIZATION}", "--api-key=${SEARCH_ARG_API_KEY}", "apikey=${WEATHER_URL_APIKEY}", "units=metric"},
		},
		{
			file:    "vscode_mcp.json",
			servers: []string{"github", "perplexity"},
			secrets: map[string]string{},
			yaml:    []string{"PERPLEXITY_API_KEY: ${PERPLEXITY_INPUT_PERPLEXITY_KEY}", "HOME_DIR: ${HOME}", "Authorization: Bearer ${GITHUB_TOKEN}", "transport: http"},
			asked:   []Asked{{Server: "perplexity", Input: "perplexity-key", Ref: "PERPLEXITY_INPUT_PERPLEXITY_KEY"}},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/import/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			im, err := ImportClientConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range im.Servers {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.servers) {
				t.Fatalf("servers %v, want %v", names, tc.servers)
			}
			if len(im.Secrets) != len(tc.secrets) {
				t.Fatalf("secrets %v, want %v", slices.Sorted(maps.Keys(im.Secrets)), slices.Sorted(maps.Keys(tc.secrets)))
			}
			for k, v := range tc.secrets {
				if im.Secrets[k] != v {
					t.Errorf("secret %s = %q, want %q", k, im.Secrets[k], v)
				}
			}
			y, err := im.YAML()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.yaml {
				if !strings.Contains(string(y), want) {
					t.Errorf("YAML lacks %q:\n%s", want, y)
				}
			}
			for _, v := range im.Secrets {
				if strings.Contains(string(y), v) {
					t.Errorf("YAML holds the literal secret %q", v)
				}
			}
			if !slices.Equal(im.Asked, tc.asked) {
				t.Errorf("asked %+v, want %+v", im.Asked, tc.asked)
			}
			for _, want := range tc.notes {
				if !slices.ContainsFunc(im.Notes, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("no note says %q: %v", want, im.Notes)
				}
			}
			// What it prints is a company file the hub accepts as it is,
			// every server pinned (issue 28): its tools were never
			// reviewed here. Trusted, every one is auto instead.
			const units = "units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]\n"
			c, err := Parse(append([]byte(units), y...))
			if err != nil {
				t.Fatalf("the imported YAML is refused: %v\n%s", err, y)
			}
			for _, s := range c.MCPServers {
				if s.Trust != TrustPinned {
					t.Errorf("imported %s has trust %q, want pinned", s.Name, s.Trust)
				}
			}
			im.Trusted()
			if y, err = im.YAML(); err != nil {
				t.Fatal(err)
			}
			if c, err = Parse(append([]byte(units), y...)); err != nil {
				t.Fatalf("the trusted YAML is refused: %v\n%s", err, y)
			}
			for _, s := range c.MCPServers {
				if s.Trust != TrustAuto {
					t.Errorf("trusted %s has trust %q, want auto", s.Name, s.Trust)
				}
			}
		})
	}
}

func TestImportRefusesWhatIsNoClientConfig(t *testing.T) {
	for _, doc := range []string{`not json`, `{}`, `{"mcpServers": {}}`, `[1,2]`} {
		if _, err := ImportClientConfig([]byte(doc)); err == nil {
			t.Errorf("%s imported", doc)
		}
	}
}

// The edges of what the clients write: VS Code's user settings keep the
// servers under mcp.servers beside other settings, with comments (a line
// comment may end the file; a string may hold what looks like one); names
// that slug alike are numbered in order; a URL's userinfo password is a
// credential like any other.
func TestImportEdgesOfTheClientFormats(t *testing.T) {
	doc := `// user settings
{
  "editor.fontSize": 14, /* a block comment */
  "mcp": {
    "servers": {
      "My Tool": {"command": "a", "args": ["say \"// not a comment\" here"]},
      "my tool": {"command": "b"},
      "MY-TOOL": {"command": "c"},
      "remote": {"url": "https://bob:hunter2@api.example.com/mcp"}
    }
  }
} // the end, with no line break after it`
	im, err := ImportClientConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]MCPServer{}
	var names []string
	for _, s := range im.Servers {
		names = append(names, s.Name)
		got[s.Name] = s
	}
	if want := []string{"my-tool", "my-tool-2", "my-tool-3", "remote"}; !slices.Equal(names, want) {
		t.Fatalf("servers %v, want %v", names, want)
	}
	// Alike names are numbered in the order of the names as written.
	if got["my-tool"].Command != "c" || got["my-tool-2"].Command != "a" || got["my-tool-3"].Command != "b" {
		t.Fatalf("numbered out of order: %+v", im.Servers)
	}
	if args := got["my-tool-2"].Args; len(args) != 1 || args[0] != `say "// not a comment" here` {
		t.Fatalf("a string holding // lost its text: %q", args)
	}
	if im.Secrets["REMOTE_URL_PASSWORD"] != "hunter2" || got["remote"].URL != "https://bob:${REMOTE_URL_PASSWORD}@api.example.com/mcp" {
		t.Fatalf("the URL's password: %q, secrets %v", got["remote"].URL, im.Secrets)
	}
}
