package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

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
	// meaning is the embeddings model they rank meaning with, which an
	// apply may change.
	meaning *embeddings
}

// embeddings is the embeddings model the node's indexes use, as the
// revision in force declares it: an apply that declares another gives
// every index the new one (which embeds every document again in the
// background) without a restart.
type embeddings struct {
	env config.Lookup
	log *slog.Logger

	mu   sync.Mutex
	ix   []*search.Index
	spec config.EmbeddingsSpec // what emb was made from; zero when none
	emb  search.Embedder
}

// resolve is the embedder c declares, and the spec it is made from (zero
// when none). A declaration whose variables do not resolve costs only
// meaning: nil, and the log says why.
func (m *embeddings) resolve(c *config.Company) (search.Embedder, config.EmbeddingsSpec) {
	spec, ok, err := c.Embeddings(m.env)
	if err != nil {
		m.log.Error("search_embeddings_unavailable", "error", err.Error(), "consequence", "search ranks by keyword only until a revision whose variables resolve is applied")
		return nil, config.EmbeddingsSpec{}
	}
	if !ok {
		return nil, config.EmbeddingsSpec{}
	}
	emb := search.NewOpenAIEmbedder(spec.BaseURL, spec.APIKey, spec.Model, spec.MaxInputTokens)
	m.log.Info("search_embeddings", "model", emb.Model(), "max_input_bytes", emb.MaxInputBytes())
	return emb, spec
}

// apply gives every index the embeddings model c declares, when it is not
// the one they have: each then ranks by keyword, saying so, until its
// documents are embedded with the new model, and by meaning from then on.
// A new key or address for the same model keeps the vectors.
func (m *embeddings) apply(c *config.Company) {
	m.mu.Lock()
	defer m.mu.Unlock()
	spec, ok, err := c.Embeddings(m.env)
	if err != nil || !ok {
		spec = config.EmbeddingsSpec{}
	}
	if spec == m.spec {
		return // the same model at the same place, or still none
	}
	emb, spec := m.resolve(c)
	for _, ix := range m.ix {
		if err := ix.SetEmbedder(emb); err != nil {
			m.log.Error("search_embeddings_not_switched", "error", err.Error(), "consequence", "this index ranks by keyword only until the hub restarts")
			_ = ix.SetEmbedder(nil)
		}
	}
	old := m.emb
	m.emb, m.spec = emb, spec
	closeEmbedder(old)
	model := ""
	if emb != nil {
		model = emb.Model()
	}
	m.log.Info("search_embeddings_changed", "model", model, "consequence", "search ranks by keyword until every document has its vector of the new model, then by meaning")
}

func (m *embeddings) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	closeEmbedder(m.emb)
	m.emb = nil
}

// openSearch opens the tracker's, the knowledge base's and the seats' past
// turns' search indexes beside the node's state, under
// DATA/state/search/<kind>, with the company's embeddings model, which a
// later apply may change (indexes.meaning). An embeddings model whose
// variables do not resolve costs only meaning: the hub starts, search is
// keyword only and says so, and the log says why. The returned func closes
// the indexes and the embedder.
func openSearch(ctx context.Context, dataDir string, node *state.Node, c *config.Company, env config.Lookup, log *slog.Logger) (indexes, func(), error) {
	if node == nil {
		return indexes{}, func() {}, nil
	}
	m := &embeddings{env: env, log: log.With("component", "search")}
	emb, spec := m.resolve(c)
	m.emb, m.spec = emb, spec
	dir := filepath.Join(dataDir, "state", "search")
	var ix indexes
	closeAll := func() {
		for _, i := range []*search.Index{ix.tracker, ix.knowledge, ix.episodes} {
			if i != nil {
				_ = i.Close()
			}
		}
		m.close()
	}
	var err error
	if ix.tracker, err = tracker.OpenSearch(ctx, node, dir, emb, m.log); err != nil {
		closeAll()
		return indexes{}, nil, fmt.Errorf("opening the tracker's search index: %w", err)
	}
	if ix.knowledge, err = knowledge.OpenSearch(ctx, node, dir, emb, m.log); err != nil {
		closeAll()
		return indexes{}, nil, fmt.Errorf("opening the knowledge base's search index: %w", err)
	}
	if ix.episodes, err = agent.OpenEpisodeSearch(ctx, node, dir, emb, m.log); err != nil {
		closeAll()
		return indexes{}, nil, fmt.Errorf("opening the search of the seats' past turns: %w", err)
	}
	m.ix = []*search.Index{ix.tracker, ix.knowledge, ix.episodes}
	ix.meaning = m
	return ix, closeAll, nil
}

// applied is what the node does once a revision is in force that the
// hub does not: here, switching search to the embeddings model it names.
func (ix indexes) applied(c *config.Company) {
	if ix.meaning != nil {
		ix.meaning.apply(c)
	}
}

func closeEmbedder(e search.Embedder) {
	if c, ok := e.(io.Closer); ok {
		_ = c.Close()
	}
}
