package screen

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// OPS-7: the add form's violations name the form's fields, not the YAML
// path of an entry the person never saw; a violation about anything else
// is kept as the company check wrote it.
func TestFormViolationsNameTheFormsFields(t *testing.T) {
	const entry = "mcp_servers[3]"
	for _, c := range []struct{ in, want string }{
		{`mcp_servers[3].name: "Not A Slug" must be lower-case letters`, `Name: "Not A Slug" must be lower-case letters`},
		{`mcp_servers[3].name: is required`, `Name is required`},
		{`mcp_servers[3]: a stdio server needs a command`, `A stdio server needs a command`},
		{`mcp_servers[3].url: "ftp://x" is not an http(s) URL`, `Address: "ftp://x" is not an http(s) URL`},
		{`mcp_servers[3].args[1]: holds the control character U+0000 at byte 2`, `Arguments, line 2: holds the control character U+0000 at byte 2`},
		{`mcp_servers[3].env.API_KEY: holds the control character U+0000 at byte 0`, `Environment variable API_KEY: holds the control character U+0000 at byte 0`},
		{`mcp_servers[3].headers.Authorization: two spellings`, `Header Authorization: two spellings`},
		{`mcp_servers[3].tool_prefix: "a b" must be up to 32 letters`, `Tool prefix: "a b" must be up to 32 letters`},
		// Not the new entry, or a key the form has no field for: as written.
		{`mcp_servers[1].name: "gh" is declared twice`, `mcp_servers[1].name: "gh" is declared twice`},
		{`mcp_servers[30].name: is required`, `mcp_servers[30].name: is required`},
		{`mcp_servers[3].delivers: "" would say its tools reach nobody`, `mcp_servers[3].delivers: "" would say its tools reach nobody`},
		{`units[0].id: is required`, `units[0].id: is required`},
	} {
		if got := formViolations(entry, []string{c.in}); len(got) != 1 || got[0] != c.want {
			t.Errorf("%q reads %q, want %q", c.in, got, c.want)
		}
	}
	if got := formViolations("", []string{"mcp_servers[3].name: is required"}); got[0] != "mcp_servers[3].name: is required" {
		t.Errorf("with no entry placed, %q", got)
	}
}

// The form's answer, as the script reads it and as the page draws it
// again, says the field ("A stdio server needs a command"), never the
// entry's path.
func TestAddAnswersInTheFormsWords(t *testing.T) {
	s := serve(t)
	csrf := s.signIn(t, "admin-token")
	form := url.Values{"csrf": {csrf}, "name": {"x"}, "transport": {"stdio"}, "env_name": {""}, "env_value": {"orphan"}}
	_, body := s.do(t, "POST", Base+"/servers", form, "Accept", "application/json")
	var got struct{ Violations []string }
	_ = json.Unmarshal([]byte(body), &got)
	if !slices.Contains(got.Violations, "A stdio server needs a command") || strings.Contains(body, "mcp_servers[") {
		t.Fatalf("the script's answer: %q", got.Violations)
	}
	resp, page := s.do(t, "POST", Base+"/servers", form)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "<li>A stdio server needs a command</li>") || strings.Contains(page, "mcp_servers[") {
		t.Fatalf("the page's answer: %s\n%s", resp.Status, page)
	}
}
