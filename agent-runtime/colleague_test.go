package agent

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func testDirectory() *authority.Directory {
	return authority.NewDirectory([]authority.Unit{{ID: "core", Name: "Core"}}, []authority.Seat{
		{Handle: "ada", Role: "Tech Lead", Kind: authority.SeatHuman, Unit: "core", ContactIDs: []string{"ada@example.com"}},
		{Handle: "alan", Role: "Engineer", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "grace", Role: "Engineer", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "linus", Role: "Advisor", Kind: authority.SeatHuman, ContactIDs: []string{"linus@example.com"}, Withheld: true},
		{Handle: "bob", Role: "Support", Kind: authority.SeatAgent},
	})
}

// BLT-2: handle, role name or contact id; case-insensitive; partial and fuzzy
// fallbacks; ambiguity answers the candidates; withheld ids name nobody.
func TestMatchColleagues(t *testing.T) {
	dir := testDirectory()
	tests := []struct {
		query string
		how   string
		want  []string
	}{
		{"ada", byHandle, []string{"ada"}},
		{"ADA", byHandle, []string{"ada"}},
		{" @Ada ", byHandle, []string{"ada"}},
		{"tech lead", byRole, []string{"ada"}},
		{"Engineer", byRole, []string{"alan", "grace"}},
		{"Ada@Example.com", byContactID, []string{"ada"}},
		{"linus@example.com", byFuzzy, nil},
		{"supp", byPartial, []string{"bob"}},
		{"example.com", byPartial, []string{"ada"}},
		{"gracee", byFuzzy, []string{"grace"}},
		{"alna", byFuzzy, []string{"alan"}},
		{"engneer", byFuzzy, []string{"alan", "grace"}},
		{"xyzzy", byFuzzy, nil},
		{"", "", nil},
	}
	for _, tc := range tests {
		seats, how := matchColleagues(dir, tc.query)
		var got []string
		for _, s := range seats {
			got = append(got, s.Handle)
		}
		if how != tc.how || !slices.Equal(got, tc.want) {
			t.Errorf("matchColleagues(%q) = %v by %q, want %v by %q", tc.query, got, how, tc.want, tc.how)
		}
	}
}

// The tool through a real MCP client: a match, candidates, a withheld person
// with no accounts, not_found and invalid.
func TestLookupColleagueTool(t *testing.T) {
	dir := testDirectory()
	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server {
		return NewBuiltinServer(BuiltinDeps{Directory: func() *authority.Directory { return dir }}, trust, nil)
	})
	caller := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}
	lookup := func(q string) (*mcp.CallToolResult, lookupOut) {
		res := c.Raw(caller, "lookup_colleague", map[string]any{"query": q})
		var out lookupOut
		if !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
		}
		return res, out
	}
	if _, out := lookup("ada"); out.Match == nil || out.Match.Handle != "ada" || !slices.Equal(out.Match.Accounts, []string{"ada@example.com"}) {
		t.Errorf("ada: %+v", out)
	}
	if _, out := lookup("engineer"); out.Match != nil || len(out.Candidates) != 2 || out.MatchedBy != byRole {
		t.Errorf("engineer: %+v", out)
	}
	if _, out := lookup("linus"); out.Match == nil || len(out.Match.Accounts) != 0 {
		t.Errorf("withheld person shows accounts: %+v", out)
	}
	for q, class := range map[string]authority.Class{"nobody-at-all-here": authority.NotFound, "  @ ": authority.Invalid} {
		res, _ := lookup(q)
		if c, ok := servers.ClassOf(res); !ok || c != class {
			t.Errorf("lookup(%q) class %q, want %q", q, c, class)
		}
	}
}
