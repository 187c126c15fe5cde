package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
)

// A seat's past turns are found through the hub's one search (package
// search), as pages and items are: a turn's end marks its episode, and the
// index reads it back from the projection, so query_episodes ranks by
// meaning where the company names an embeddings model, by keyword where it
// names none, and says which in the same words every search of the hub
// uses (BLT-1, KB-3). Each episode is scoped to its seat: a seat recalls
// its own turns and nobody else's.

// EpisodeKind is the kind episodes are searched as.
const EpisodeKind = "agent.episodes"

// OpenEpisodeSearch opens the episodes' search index over node, its
// keyword index under searchDir/EpisodeKind; Close it before the node.
func OpenEpisodeSearch(ctx context.Context, node *state.Node, searchDir string, emb search.Embedder, log *slog.Logger) (*search.Index, error) {
	episodes := search.Options{Kind: EpisodeKind, Source: episodeDoc, IDs: episodeIDs, Noun: "past turn"}
	return search.Open(ctx, episodes.Over(node, searchDir, emb, log))
}

// episodeDoc is an ended turn as the search index reads it: what it was
// about and what woke it as its title, what it answered as its body. A
// turn still running is no episode yet. A compacted month is read by its
// summary.
func episodeDoc(r pebble.Reader, key string) (search.Doc, bool, error) {
	if rest, ok := strings.CutPrefix(key, monthDocID); ok {
		var m monthRecord
		found, err := state.GetJSON(r, kMonth+rest, &m)
		if err != nil || !found {
			return search.Doc{}, false, err
		}
		return search.Doc{ID: key, Title: "your turns of " + monthName(m.Month), Body: m.Summary, Scope: m.Seat}, true, nil
	}
	var rec TurnRecord
	found, err := state.GetJSON(r, kTurn+key, &rec)
	if err != nil || !found || rec.Running() {
		return search.Doc{}, false, err
	}
	return search.Doc{ID: rec.Key, Title: rec.About, Body: strings.TrimSpace(rec.Trigger + "\n\n" + rec.Account), Scope: rec.Seat}, true, nil
}

// episodeIDs lists every ended turn's key and every compacted month's
// id, for a rebuild of the index.
func episodeIDs(r pebble.Reader, fn func(id string) error) error {
	err := scan(r, kEp, func(_ string, v []byte) error {
		var key string
		if err := json.Unmarshal(v, &key); err != nil {
			return err
		}
		return fn(key)
	})
	if err != nil {
		return err
	}
	return scan(r, kMonth, func(k string, _ []byte) error {
		return fn(monthDocID + strings.TrimPrefix(k, kMonth))
	})
}
