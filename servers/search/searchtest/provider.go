// Package searchtest is the test kit of the search layer: a local
// embeddings provider speaking the OpenAI-compatible POST /v1/embeddings
// over real HTTP on loopback, with deterministic vectors. Point
// search.NewOpenAIEmbedder at BaseURL with model Model. It is for tests
// only; nothing in the product imports it (and it imports nothing of
// search, so search's own tests can use it).
//
// Its vectors are bags of concepts: each word a concept knows (its
// synonyms) adds to that concept's axis, so "automobile" and "car" are
// near while they share no word a keyword index could match.
package searchtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"go.uber.org/goleak"
)

// Model is the model name the provider serves.
const Model = "bag-of-concepts"

// Reversed is a second model the provider serves: Model's vectors with
// their axes in reverse order, so a vector of one model compared with one
// of the other ranks by nothing it means. A test that changes the model
// finds by meaning afterwards only if every document was embedded again.
const Reversed = "bag-of-concepts-reversed"

// concepts are the axes of the vectors; every word of a line means that
// line's concept.
var concepts = [][]string{
	{"car", "cars", "automobile", "automobiles", "vehicle", "vehicles", "sedan", "truck", "motor", "engine"},
	{"invoice", "invoices", "billing", "bill", "payment", "payments", "refund", "money", "price", "charge"},
	{"database", "databases", "postgres", "sql", "db", "table", "tables", "schema"},
	{"recipe", "recipes", "cook", "cooking", "kitchen", "bake", "baking", "oven", "soup"},
	{"rain", "snow", "storm", "weather", "forecast", "sunny", "cloudy"},
	{"network", "latency", "packet", "packets", "router", "dns", "bandwidth"},
	{"dog", "dogs", "cat", "cats", "puppy", "kitten", "pet", "pets"},
}

var conceptOf = func() map[string]int {
	m := map[string]int{}
	for i, ws := range concepts {
		for _, w := range ws {
			m[w] = i
		}
	}
	return m
}()

// Dims is the length of every vector: one axis per concept and one for
// text that names none, so no vector is zero.
var Dims = len(concepts) + 1

// Vector is the vector the provider answers for text.
func Vector(text string) []float32 {
	v := make([]float32, Dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if c, ok := conceptOf[w]; ok {
			v[c]++
		}
	}
	empty := true
	for _, f := range v {
		if f != 0 {
			empty = false
		}
	}
	if empty {
		v[len(concepts)] = 1
	}
	return v
}

// Provider is a running embeddings server.
type Provider struct {
	srv *httptest.Server

	mu     sync.Mutex
	inputs []string
	auth   []string
	calls  int
	down   bool
	poison string
}

// NewProvider starts a provider on loopback; it stops when the test ends.
func NewProvider(t testing.TB) *Provider {
	t.Helper()
	p := Start()
	t.Cleanup(p.Stop)
	return p
}

// Start starts a provider on loopback outside a test (a re-executed test
// binary's child); whoever starts it stops it.
func Start() *Provider {
	p := &Provider{}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// BaseURL is what a company file's base_url names: the server's /v1.
func (p *Provider) BaseURL() string { return p.srv.URL + "/v1" }

// Stop shuts the server down: every later request finds nothing
// listening. Safe to call twice.
func (p *Provider) Stop() { p.srv.Close() }

// SetDown makes the provider answer 503 to everything while down is true,
// as a provider that is up but failing.
func (p *Provider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// Poison makes the provider answer 500 to any request with an input that
// contains marker ("" cures it): a provider that chokes on some documents
// while it answers queries.
func (p *Provider) Poison(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.poison = marker
}

// Inputs is every input the provider was sent, in order.
func (p *Provider) Inputs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.inputs...)
}

// Calls counts the requests that reached the provider.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Authorizations lists the Authorization header of every request.
func (p *Provider) Authorizations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.auth...)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Input json.RawMessage `json:"input"`
		Model string          `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			http.Error(w, `{"error":{"message":"input must be a string or an array of strings"}}`, http.StatusBadRequest)
			return
		}
		inputs = []string{one}
	}
	p.mu.Lock()
	p.calls++
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	down := p.down
	for _, in := range inputs {
		down = down || (p.poison != "" && strings.Contains(in, p.poison))
	}
	if !down {
		p.inputs = append(p.inputs, inputs...)
	}
	p.mu.Unlock()
	if down {
		http.Error(w, `{"error":{"message":"the model is loading"}}`, http.StatusServiceUnavailable)
		return
	}
	vector := Vector
	switch req.Model {
	case Model:
	case Reversed:
		vector = func(text string) []float32 {
			v := Vector(text)
			slices.Reverse(v)
			return v
		}
	default:
		http.Error(w, `{"error":{"message":"no such model"}}`, http.StatusNotFound)
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: req.Model}
	for i, in := range inputs {
		out.Data = append(out.Data, datum{Object: "embedding", Index: i, Embedding: vector(in)})
		out.Usage.PromptTokens += len(strings.Fields(in))
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// LeakOptions are the goroutines a test binary that links the search
// package has for its whole life, which goleak must not count: bleve starts
// a process-wide analysis pool when it is loaded, owned by no index.
func LeakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")}
}
