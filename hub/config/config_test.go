package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
)

// TestCheckData runs every document under testdata/check: each "# want:"
// line must appear in the report, and the report must hold nothing else, so
// every violation of a document is reported at once and only once. A
// document without violations is then resolved against the variables its
// "# env: NAME=value" lines set (and nothing else): each "# unset:" line
// must be among the references left unresolved, and they must be all of
// them, so what `config check` and `serve` say of a machine is tested row by
// row too.
func TestCheckData(t *testing.T) {
	files, _ := filepath.Glob("testdata/check/*.yaml")
	if len(files) == 0 {
		t.Fatal("no test documents")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var wants, unsets []string
			env := map[string]string{}
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, w)
				}
				if u, ok := strings.CutPrefix(line, "# unset: "); ok {
					unsets = append(unsets, u)
				}
				if kv, ok := strings.CutPrefix(line, "# env: "); ok {
					k, v, _ := strings.Cut(kv, "=")
					env[k] = v
				}
			}
			c, err := Parse(data)
			if len(wants) == 0 {
				if err != nil {
					t.Fatalf("unexpected violations: %v", err)
				}
				checkUnsets(t, c.Unsets(func(k string) (string, bool) { v, ok := env[k]; return v, ok }), unsets)
				return
			}
			if len(unsets) > 0 {
				t.Fatal("a document with violations is never resolved: its # unset: lines test nothing")
			}
			var v Violations
			if !errors.As(err, &v) {
				t.Fatalf("want violations, got %v", err)
			}
			for _, w := range wants {
				found := false
				for _, got := range v {
					if strings.Contains(got, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing violation %q in:\n%v", w, err)
				}
			}
			if len(v) != len(wants) {
				t.Errorf("got %d violations, want %d:\n%v", len(v), len(wants), err)
			}
		})
	}
}

func checkUnsets(t *testing.T, got []Unset, wants []string) {
	t.Helper()
	var lines []string
	for _, u := range got {
		lines = append(lines, u.String())
	}
	report := strings.Join(lines, "\n")
	for _, w := range wants {
		if !strings.Contains(report, w) {
			t.Errorf("missing unresolved reference %q in:\n%s", w, report)
		}
	}
	if len(got) != len(wants) {
		t.Errorf("got %d unresolved references, want %d:\n%s", len(got), len(wants), report)
	}
}

func TestDefaultCompany(t *testing.T) {
	c := Default()
	d := c.Directory()
	var humans, agents, admins int
	for _, s := range d.Seats() {
		switch s.Kind {
		case authority.SeatHuman:
			humans++
		case authority.SeatAgent:
			agents++
		}
		if s.Admin {
			admins++
		}
	}
	if humans != 1 || agents != 1 || admins != 1 || len(d.Units()) != 1 {
		t.Fatalf("default company: %d people, %d agents, %d admins, %d units", humans, agents, admins, len(d.Units()))
	}
	if c.TrackerBackend() != "native" || c.KnowledgeBackend() != "native" {
		t.Fatal("default backends are not native")
	}
	if u := d.Units()[0]; u.Project == "" || u.Lead == "" {
		t.Fatalf("default unit has no project or lead: %+v", u)
	}
}

func TestOperatorTokens(t *testing.T) {
	data, _ := os.ReadFile("testdata/check/valid-full.yaml")
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ADA_TOKEN": "ada-secret", "CI_TOKEN": "ci-secret"}
	got, err := c.OperatorTokens(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := []authority.TokenEntry{
		{ID: "laptop", Secret: "ada-secret", Seat: "ada", Admin: true},
		{ID: "ci", Secret: "ci-secret", Admin: true},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("tokens = %+v", got)
	}
	env["CI_TOKEN"] = "  "
	delete(env, "ADA_TOKEN")
	_, err = c.OperatorTokens(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	var v Violations
	if !errors.As(err, &v) || len(v) != 2 || !strings.Contains(err.Error(), "ADA_TOKEN") || !strings.Contains(err.Error(), "CI_TOKEN") {
		t.Fatalf("unset and empty variables not both reported: %v", err)
	}
}

func TestEffectiveTransportAndShared(t *testing.T) {
	f := false
	tests := []struct {
		s         MCPServer
		transport string
		shared    bool
	}{
		{MCPServer{Command: "x"}, "stdio", true},
		{MCPServer{URL: "https://x"}, "http", true},
		{MCPServer{Transport: "sse", URL: "https://x", Shared: &f}, "sse", false},
	}
	for _, tc := range tests {
		if tc.s.EffectiveTransport() != tc.transport || tc.s.IsShared() != tc.shared {
			t.Errorf("%+v: %s %v", tc.s, tc.s.EffectiveTransport(), tc.s.IsShared())
		}
	}
}

// FuzzParse holds the parser of the company file, which a stranger's
// PUT /config/mcp-servers body and a half-saved file both reach, to a
// report or a company that can be administered: never a panic, never an
// accepted document that is empty or leaves nobody an administrator's
// credential (issue 15, finding 3). Every check document seeds it, and so
// does each of them cut short, as an editor's save leaves a file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/check/*.yaml")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err == nil && c == nil {
			t.Fatal("nil company without error")
		}
		if err == nil {
			if declaresNothing(data) {
				t.Fatalf("an empty company was accepted: %q", data)
			}
			if !administered(c) {
				t.Fatalf("a company nobody administers was accepted: %q", data)
			}
		}
		if err != nil {
			var v Violations
			if !errors.As(err, &v) || len(v) == 0 {
				t.Fatalf("error is not a non-empty Violations: %T %v", err, err)
			}
		}
	})
}

// administered reports whether one of the company's credentials is an
// administrator's.
func administered(c *Company) bool {
	tokens, _ := c.Credentials()
	dir := c.Directory()
	for _, t := range tokens {
		if t.Seat == "" && t.Admin {
			return true
		}
		if s, ok := dir.Seat(t.Seat); t.Seat != "" && ok && s.Admin {
			return true
		}
	}
	return false
}

// The embeddings model resolves its provider's ${VAR}s like every other
// value of the company file; an unset key is named, never sent empty; a
// known model brings its limit; the key is among the values redacted from
// results.
func TestEmbeddingsResolve(t *testing.T) {
	c, err := Parse([]byte(`
providers:
  local: {api: openai, base_url: "http://${LLM_HOST}/v1", api_key: "${LOCAL_API_KEY}"}
  cloud: {api: openai}
models:
  embeddings: {provider: local, model: nomic-embed-text}
`))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LLM_HOST": "127.0.0.1:11434", "LOCAL_API_KEY": "sk-secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	spec, ok, err := c.Embeddings(lookup)
	if err != nil || !ok {
		t.Fatalf("Embeddings: %v %v", ok, err)
	}
	want := EmbeddingsSpec{Provider: "local", BaseURL: "http://127.0.0.1:11434/v1", APIKey: "sk-secret", Model: "nomic-embed-text", MaxInputTokens: 8192}
	if spec != want {
		t.Fatalf("spec %+v, want %+v", spec, want)
	}
	if strings.Contains(spec.String(), "sk-secret") {
		t.Fatalf("the spec's text shows the key: %s", spec)
	}
	found := false
	for _, v := range c.ReferencedValues(lookup) {
		found = found || v == "sk-secret"
	}
	if !found {
		t.Fatal("the provider's key is not among the values redacted from results")
	}
	delete(env, "LOCAL_API_KEY")
	if _, _, err := c.Embeddings(lookup); err == nil || !strings.Contains(err.Error(), "LOCAL_API_KEY") {
		t.Fatalf("an unset key: %v", err)
	}

	c.Models.Embeddings = &ModelRef{Provider: "cloud", Model: "text-embedding-3-small"}
	if spec, _, err := c.Embeddings(lookup); err != nil || spec.BaseURL != "https://api.openai.com/v1" || spec.MaxInputTokens != 8191 || spec.APIKey != "" {
		t.Fatalf("the vendor's defaults: %+v %v", spec, err)
	}
	c.Models.Embeddings = nil
	if _, ok, err := c.Embeddings(lookup); ok || err != nil {
		t.Fatalf("no model: %v %v", ok, err)
	}
}

// A seat's chat model: its role's, else models.default; provider/model
// names a model at a provider; the auxiliary falls back to the seat's
// own; a person has none; an unset key is named.
func TestSeatModel(t *testing.T) {
	c, err := Parse([]byte(`
providers:
  local: {api: openai, base_url: "http://127.0.0.1:11434/v1"}
  claude: {api: anthropic, api_key: "${CLAUDE_KEY}"}
models:
  default: {provider: local, model: "qwen3:8b"}
units:
  - id: core
    name: Core
    roles:
      - {name: Assistant, handle: assistant, instructions: "Be brief."}
      - {name: Writer, handle: writer, model: "claude/claude-sonnet-4-5"}
      - {name: Ada, handle: ada, kind: human, admin: true}
budget:
  seat: {day: 100}
  company: {month: 5000, hour: 10}
`))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAUDE_KEY": "sk-ant"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	spec, ok, err := c.SeatModel("assistant", lookup)
	want := ChatSpec{Name: "default", Provider: "local", API: "openai", BaseURL: "http://127.0.0.1:11434/v1", Model: "qwen3:8b", MaxOutputTokens: DefaultMaxOutputTokens}
	if err != nil || !ok || spec != want {
		t.Fatalf("assistant: %+v %v %v", spec, ok, err)
	}
	if c.SeatInstructions("assistant") != "Be brief." {
		t.Fatalf("instructions %q", c.SeatInstructions("assistant"))
	}
	spec, ok, err = c.SeatModel("writer", lookup)
	if err != nil || !ok || spec.API != "anthropic" || spec.BaseURL != "https://api.anthropic.com" || spec.Model != "claude-sonnet-4-5" || spec.APIKey != "sk-ant" {
		t.Fatalf("writer: %+v %v %v", spec, ok, err)
	}
	if strings.Contains(spec.String(), "sk-ant") {
		t.Fatalf("the spec's text shows the key: %s", spec)
	}
	if aux, ok, err := c.AuxiliaryModel("writer", lookup); err != nil || !ok || aux.Model != "claude-sonnet-4-5" {
		t.Fatalf("auxiliary falls back to the seat's own: %+v %v %v", aux, ok, err)
	}
	if _, ok, _ := c.SeatModel("ada", lookup); ok {
		t.Fatal("a person has a model")
	}
	delete(env, "CLAUDE_KEY")
	if _, _, err := c.SeatModel("writer", lookup); err == nil || !strings.Contains(err.Error(), "CLAUDE_KEY") {
		t.Fatalf("an unset key: %v", err)
	}
	got := c.Budget.Ceilings()
	wantC := []Ceiling{{"company", "hour", 10}, {"company", "month", 5000}, {"seat", "day", 100}}
	if len(got) != len(wantC) || got[0] != wantC[0] || got[1] != wantC[1] || got[2] != wantC[2] {
		t.Fatalf("ceilings %+v", got)
	}
}

// A company that declares no credential is given the generated one, bound
// to its first administrator (a person; an agent is never one), or an
// administrator's own credential where it has none; declared credentials
// are used as they are.
func TestCredentialsGeneratedWhenNoneDeclared(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      Token
		generated bool
	}{
		{"first administrator", `units: [{id: core, name: Core, roles: [{name: Bot, handle: bot}, {name: Bo, handle: bo, kind: human}, {name: Ada, handle: ada, kind: human, admin: true}, {name: Eve, handle: eve, kind: human, admin: true}]}]`,
			Token{ID: "operator", Token: "${CREWLET_OPERATOR_TOKEN}", Seat: "ada"}, true},
		{"no administrator", `units: [{id: core, name: Core, roles: [{name: Bot, handle: bot}, {name: Bo, handle: bo, kind: human}]}]`,
			Token{ID: "operator", Token: "${CREWLET_OPERATOR_TOKEN}", Admin: true}, true},
		{"declared", `units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
api: {auth: {tokens: [{id: ci, token: "${CI_TOKEN}", admin: true}]}}`,
			Token{ID: "ci", Token: "${CI_TOKEN}", Admin: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			got, generated := c.Credentials()
			if len(got) != 1 || got[0].ID != tc.want.ID || got[0].Token != tc.want.Token || got[0].Seat != tc.want.Seat || got[0].Admin != tc.want.Admin || generated != tc.generated {
				t.Fatalf("credentials %+v generated %v, want %+v generated %v", got, generated, tc.want, tc.generated)
			}
			if c.UsesGeneratedToken() != tc.generated {
				t.Fatalf("UsesGeneratedToken = %v", !tc.generated)
			}
		})
	}
}
