package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
)

// Embedder is the embeddings model a company names (models.embeddings),
// resolved against env, or nil when it names none. Whoever gets one closes
// it when done, if it is an io.Closer.
func Embedder(c *config.Company, env config.Lookup) (search.Embedder, error) {
	spec, ok, err := c.Embeddings(env)
	if err != nil || !ok {
		return nil, err
	}
	return search.NewOpenAIEmbedder(spec.BaseURL, spec.APIKey, spec.Model, spec.MaxInputTokens), nil
}

// indexes are the search indexes of the first-party servers that search
// (the hub's one search, one index a kind).
type indexes struct {
	tracker, knowledge *search.Index
	// episodes are the seats' past turns, which query_episodes searches.
	episodes *search.Index
}

// openSearch opens the tracker's, the knowledge base's and the seats' past
// turns' search indexes beside the node's state, under
// DATA/state/search/<kind>, with the company's embeddings model. An
// embeddings model whose variables do not resolve costs only meaning: the
// hub starts, search is keyword only and says so, and the log says why. The returned func closes the indexes and
// the embedder.
func openSearch(ctx context.Context, dataDir string, node *state.Node, c *config.Company, env config.Lookup, log *slog.Logger) (indexes, func(), error) {
	if node == nil {
		return indexes{}, func() {}, nil
	}
	log = log.With("component", "search")
	emb, err := Embedder(c, env)
	if err != nil {
		log.Error("search_embeddings_unavailable", "error", err.Error(), "consequence", "search ranks by keyword only until the hub restarts with the variables set")
		emb = nil
	}
	if emb != nil {
		log.Info("search_embeddings", "model", emb.Model(), "max_input_bytes", emb.MaxInputBytes())
	}
	dir := filepath.Join(dataDir, "state", "search")
	var ix indexes
	closeAll := func() {
		for _, i := range []*search.Index{ix.tracker, ix.knowledge, ix.episodes} {
			if i != nil {
				_ = i.Close()
			}
		}
		closeEmbedder(emb)
	}
	if ix.tracker, err = tracker.OpenSearch(ctx, node, dir, emb, log); err != nil {
		closeAll()
		return indexes{}, nil, fmt.Errorf("opening the tracker's search index: %w", err)
	}
	if ix.knowledge, err = knowledge.OpenSearch(ctx, node, dir, emb, log); err != nil {
		closeAll()
		return indexes{}, nil, fmt.Errorf("opening the knowledge base's search index: %w", err)
	}
	if ix.episodes, err = agent.OpenEpisodeSearch(ctx, node, dir, emb, log); err != nil {
		closeAll()
		return indexes{}, nil, fmt.Errorf("opening the search of the seats' past turns: %w", err)
	}
	return ix, closeAll, nil
}

func closeEmbedder(e search.Embedder) {
	if c, ok := e.(io.Closer); ok {
		_ = c.Close()
	}
}

// noteModelChange says, on a reload, that an embeddings model changed in
// the company file takes effect only when the hub restarts: the index keeps
// the model its vectors were made with until then.
func noteModelChange(before, after *config.Company, log *slog.Logger) {
	declared := func(c *config.Company) (any, any) {
		if c.Models.Embeddings == nil {
			return nil, nil
		}
		return *c.Models.Embeddings, c.Providers[c.Models.Embeddings.Provider]
	}
	m0, p0 := declared(before)
	m1, p1 := declared(after)
	if !reflect.DeepEqual(m0, m1) || !reflect.DeepEqual(p0, p1) {
		log.Warn("search_embeddings_changed", "consequence", "search keeps the embeddings model it started with until the hub restarts")
	}
}
