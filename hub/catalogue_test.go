package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func entry(name string, src Source) Entry {
	return Entry{Name: name, Source: src, InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{},"b":{}}}`)}
}

// CAT-12: a name collision is refused whole, never shadowed.
func TestCatalogueRefusesCollisions(t *testing.T) {
	c := NewCatalogue()
	if err := c.Add(entry("search", SourceMCP("tavily")), entry("fetch", SourceMCP("tavily"))); err != nil {
		t.Fatal(err)
	}
	err := c.Add(entry("read", SourceMCP("files")), entry("search", SourceMCP("files")))
	if err == nil || !strings.Contains(err.Error(), "search (already from mcp:tavily)") || !strings.Contains(err.Error(), "tool_prefix") {
		t.Fatalf("collision not refused: %v", err)
	}
	if _, ok := c.Get("read"); ok {
		t.Fatal("a refused batch was partly filed")
	}
	if err := c.Add(entry("x", SourceBuiltin), entry("x", SourceBuiltin)); err == nil {
		t.Fatal("a duplicate inside one batch was filed")
	}
	if e, _ := c.Get("search"); e.Source != SourceMCP("tavily") {
		t.Fatalf("search now from %s", e.Source)
	}
	c.RemoveSource(SourceMCP("tavily"))
	if len(c.Entries()) != 0 {
		t.Fatalf("RemoveSource left %v", c.Entries())
	}
	if err := c.Add(entry("search", SourceMCP("files"))); err != nil {
		t.Fatalf("name not free after its source left: %v", err)
	}
}

// CAT-1: the source of an MCP tool is the bare template name.
func TestSourceGrammar(t *testing.T) {
	if SourceMCP("github") != "mcp:github" || SourceBuiltin != "builtin" {
		t.Fatal("source grammar changed")
	}
}

func TestArgCount(t *testing.T) {
	if n := entry("x", SourceBuiltin).ArgCount(); n != 2 {
		t.Fatalf("ArgCount = %d", n)
	}
	if n := (Entry{}).ArgCount(); n != 0 {
		t.Fatalf("ArgCount of no schema = %d", n)
	}
}

// CAT-10, CAT-11: a seat's own tools resolve first, then the company's; one
// seat's children are not another's.
func TestSeatRegistryLayering(t *testing.T) {
	company := NewCatalogue()
	_ = company.Add(entry("lookup_colleague", SourceBuiltin), entry("create_issue", SourceMCP("github")))
	alice, bob := NewCatalogue(), NewCatalogue()
	_ = alice.Add(entry("create_issue", SourceMCP("github")), entry("jira_search", SourceMCP("atlassian")))
	_ = bob.Add(entry("slack_post", SourceMCP("slack")))

	ra, rb := SeatRegistry(alice, company), SeatRegistry(bob, company)
	if e, ok := ra.Resolve("create_issue"); !ok || e.Source != SourceMCP("github") {
		t.Fatal("alice's create_issue not resolved")
	}
	// The seat's own entry wins over the company's entry of the same name.
	ownFirst, _ := ra.Resolve("create_issue")
	if _, inOwn := alice.Get("create_issue"); !inOwn || ownFirst.backend != nil {
		t.Fatal("own tool not resolved first")
	}
	if _, ok := ra.Resolve("slack_post"); ok {
		t.Fatal("alice reaches bob's child")
	}
	if _, ok := rb.Resolve("jira_search"); ok {
		t.Fatal("bob reaches alice's child")
	}
	var names []string
	for _, e := range ra.Entries() {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "create_issue,jira_search,lookup_colleague" {
		t.Fatalf("alice is offered %v", names)
	}
	if got := len(CompanyRegistry(company).Entries()); got != 2 {
		t.Fatalf("company registry offers %d", got)
	}
}

// A first-party server mounted in-process files its tools as builtin with
// the hints and delivers it declared.
func TestMountFilesBuiltins(t *testing.T) {
	ctx := context.Background()
	m, entries, err := mount(ctx, "kit", slog.New(slog.DiscardHandler), func(tr servers.Trust) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
		servers.Register(s, tr, nil, echoTool())
		return s
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(entries) != 1 {
		t.Fatalf("entries = %+v", entries)
	}
	e := entries[0]
	if e.Source != SourceBuiltin || e.Delivers != "thread" || e.Hints != (servers.Hints{ReadOnly: servers.No, Destructive: servers.No}) {
		t.Fatalf("entry = %+v", e)
	}
	res, err := m.Call(ctx, authority.Caller{Seat: "ada", Kind: authority.KindHuman}, "echo", json.RawMessage(`{"text":"x"}`))
	if err != nil || res.IsError {
		t.Fatalf("call through mount: %v %+v", err, res)
	}
	// Closing twice must be harmless.
	first := m.Close()
	if second := m.Close(); first != nil || second != nil {
		t.Fatalf("Close: %v, then %v", first, second)
	}
}
