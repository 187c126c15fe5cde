package screen

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// A server in its first start has filed no tools yet, and nothing is wrong
// with it: its group says it is starting, in no alarm. Only a server that
// failed or waits for a credential reads as a missing group, in red.
func TestStartingServerIsNotMissing(t *testing.T) {
	s := serve(t)
	s.servers = append(s.servers,
		Server{Name: "fresh", Shared: true, State: "Not started", Cells: []Cell{{Node: "this node", State: "Not started"}}},
		Server{Name: "quiet", Shared: true, State: "Running", Cells: []Cell{{Node: "this node", State: "Running"}}},
		Server{Name: "granted", State: "Waiting for credentials", Cells: []Cell{{Node: "this node", State: "Waiting for credentials", Seat: "bob", Reason: "waiting for seat bob's grant"}}})
	s.signIn(t, "admin-token")
	_, body := s.do(t, "GET", Base+"?live=1", nil)
	for _, want := range []string{
		`class="group" data-source="mcp:fresh"`,
		`has filed no tools yet. It is starting; its tools appear here once it lists them.`,
		`class="group" data-source="mcp:quiet"`,
		`has filed no tools yet. It runs and lists none.`,
		`class="group missing" data-source="mcp:ghost"`,
		`class="group missing" data-source="mcp:granted"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the catalogue lacks %s", want)
		}
	}
	for _, name := range []string{"fresh", "quiet"} {
		if strings.Contains(body, `Missing: <a href="/settings/mcp-tools/servers/`+name+`">`) {
			t.Errorf("%s reads as missing", name)
		}
	}
}

// A notice of something done (a decision recorded) is drawn in the
// success colour; held tools are a warning, a refusal an error.
func TestNoticeColours(t *testing.T) {
	css, err := fs.ReadFile(assetFS, "assets/screen.css")
	if err != nil {
		t.Fatal(err)
	}
	rule := func(sel string) string {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sel) + ` \{([^}]*)\}`).FindSubmatch(css)
		if m == nil {
			t.Fatalf("no rule for %s", sel)
		}
		return string(m[1])
	}
	for sel, colour := range map[string]string{".notice": "--ok", ".notice.held": "--wait", ".notice.refused": "--bad"} {
		if r := rule(sel); !strings.Contains(r, "var("+colour+"-bg)") {
			t.Errorf("%s { %s }: want the %s colours", sel, r, colour)
		}
	}
}
