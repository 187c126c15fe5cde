package agent

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/crewlet/hub/servers/state"
)

// episodesFixture records three ended turns on node: two of alan's, one
// about a car and one about a bill, and one of grace's about a car, which
// alan must never be answered.
func episodesFixture(t *testing.T, node *state.Node) *Store {
	t.Helper()
	store := NewStore(node)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i, ep := range []struct{ seat, key, trigger, account string }{
		{"alan", "kb-ep-car", "My automobile will not start on cold mornings.", "Told Ada to have the battery checked."},
		{"alan", "kb-ep-bill", "The March invoice was charged twice.", "Filed a refund with finance."},
		{"grace", "kb-ep-grace", "The sedan's engine light is on.", "Booked a garage."},
	} {
		rec := TurnRecord{Key: ep.key, Seat: ep.seat, Feed: "kb", Cursor: ep.key, Subject: ep.key, Requester: "ada",
			Woken: at.Add(time.Duration(i) * time.Minute), Trigger: ep.trigger, About: "a comment on " + ep.key,
			TriggerBy: servers.Author{Seat: "ada", Kind: authority.KindHuman}}
		c := seatCaller(rec)
		if _, err := store.write(t.Context(), c, ep.key, rec.Woken, kindStarted, map[string]string{"turn": ep.key}, rec); err != nil {
			t.Fatal(err)
		}
		end := endPayload{Key: ep.key, Outcome: Delivered, Delivered: true, Account: ep.account}
		if _, err := store.write(t.Context(), c, ep.key, rec.Woken, kindEnded, map[string]string{"turn": ep.key}, end); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func episodeTurns(t *testing.T, got map[string]any) []string {
	t.Helper()
	var out []string
	for _, e := range got["episodes"].([]any) {
		out = append(out, e.(map[string]any)["turn"].(string))
	}
	return out
}

// BLT-1, KB-3 (issue 30): query_episodes recalls a seat's own past turns by
// meaning, through the hub's one search and the company's embeddings
// model: a query that shares no word with the turn it means finds it
// first, and another seat's turn about the same thing is never answered.
func TestQueryEpisodesByMeaning(t *testing.T) {
	p := searchtest.NewProvider(t)
	node := testNode(t)
	// Open before the turns end, so each is found because its end marked
	// it, not because an index opened later read them all.
	ix, err := OpenEpisodeSearch(t.Context(), node, filepath.Join(t.TempDir(), "search"),
		search.NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	store := episodesFixture(t, node)
	if err := ix.WaitEmbedded(t.Context(), node.Position()); err != nil {
		t.Fatal(err)
	}
	deps := BuiltinDeps{Directory: func() *authority.Directory { return testDirectory() }, Store: store, Episodes: ix}
	c := serverstest.Connect(t, func(tr servers.Trust) *mcp.Server { return NewBuiltinServer(deps, tr, nil) })
	alan := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t9"}

	// "vehicle" is a word none of alan's turns holds, nor one near it.
	got := c.OK(alan, "query_episodes", map[string]any{"query": "vehicle"})
	turns := episodeTurns(t, got)
	if got["mode"] != search.ModeHybrid || got["degraded"] != nil || len(turns) == 0 || turns[0] != "kb-ep-car" {
		t.Fatalf("by meaning: %v", got)
	}
	for _, turn := range turns {
		if turn == "kb-ep-grace" {
			t.Fatalf("alan was answered grace's turn: %v", turns)
		}
	}
	// The conversation narrows what meaning ranked.
	got = c.OK(alan, "query_episodes", map[string]any{"query": "vehicle", "conversation": "kb-ep-bill"})
	if turns := episodeTurns(t, got); len(turns) != 1 || turns[0] != "kb-ep-bill" {
		t.Fatalf("by meaning, in one conversation: %v", got)
	}
	// A query past what any search takes is refused as the hub's searches
	// refuse it.
	r := c.Refused(alan, "query_episodes", map[string]any{"query": strings.Repeat("car ", 101)}, authority.Invalid)
	serverstest.MustContain(t, r.Sentence, "404 bytes", "400")
}

// BLT-1, KB-3 (issue 30): with no embeddings model, query_episodes ranks by
// keyword and says so in the words search_knowledge uses, so an empty
// answer to a query by meaning is not read as "no such turn".
func TestQueryEpisodesWithoutEmbeddingsSaysKeyword(t *testing.T) {
	node := testNode(t)
	store := episodesFixture(t, node)
	ix, err := OpenEpisodeSearch(t.Context(), node, filepath.Join(t.TempDir(), "search"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	deps := BuiltinDeps{Directory: func() *authority.Directory { return testDirectory() }, Store: store, Episodes: ix}
	c := serverstest.Connect(t, func(tr servers.Trust) *mcp.Server { return NewBuiltinServer(deps, tr, nil) })
	alan := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t9"}

	_, want := search.Unranked(search.ModeHybrid, "no embeddings model is configured for this hub (models.embeddings in the company file)", "past turn")
	got := c.OK(alan, "query_episodes", map[string]any{"query": "vehicle"})
	if got["mode"] != search.ModeKeyword || got["degraded"] != want || len(episodeTurns(t, got)) != 0 {
		t.Fatalf("by meaning without a model: %v", got)
	}
	got = c.OK(alan, "query_episodes", map[string]any{"query": "automobile"})
	if turns := episodeTurns(t, got); got["degraded"] != want || len(turns) != 1 || turns[0] != "kb-ep-car" {
		t.Fatalf("by keyword: %v", got)
	}
}
