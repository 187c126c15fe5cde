package search

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Embedder turns texts into vectors: one embeddings model at one provider.
type Embedder interface {
	// Embed answers one vector per input, in order. An input past
	// MaxInputBytes, or empty, is refused before anything is sent.
	Embed(ctx context.Context, inputs []string) ([][]float32, error)
	// Model names the model; vectors of different models are never
	// compared.
	Model() string
	// MaxInputBytes is the model's own documented input limit, as bytes.
	MaxInputBytes() int
}

// InputTooLong is the error of an input past the model's bound (OUT-3):
// it is refused before sending, never cut.
type InputTooLong struct {
	Index, Bytes, Max int
	Model             string
}

func (e *InputTooLong) Error() string {
	return fmt.Sprintf("search: input %d is %d bytes; the embeddings model %s takes at most %d", e.Index, e.Bytes, e.Model, e.Max)
}

// specialTokens is room left in a model's limit for the tokens a tokenizer
// adds around every input (BERT-style models add two).
const specialTokens = 16

// TokensToBytes is the byte bound that keeps any text within a limit of
// tokens: every token of a byte-level or word-piece tokenizer stands for at
// least one byte of UTF-8 text, so a text of n bytes is at most n tokens.
// The bound is strict rather than tight; a cut text loses some of its end,
// never the provider's refusal of the whole.
func TokensToBytes(tokens int) int { return max(0, tokens-specialTokens) }

// openAIEmbedder calls an OpenAI-compatible /v1/embeddings endpoint
// (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio).
type openAIEmbedder struct {
	svc      openai.EmbeddingService
	tr       *http.Transport
	model    string
	maxBytes int
	apiKey   string // only to keep it out of error texts
}

// NewOpenAIEmbedder is an Embedder for model at an OpenAI-compatible
// server at baseURL (".../v1"). apiKey may be empty (a local server).
// maxInputTokens is the model's documented limit. The client reads nothing
// from the environment: only what the company file configured is sent.
func NewOpenAIEmbedder(baseURL, apiKey, model string, maxInputTokens int) Embedder {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(baseURL, "/") + "/"),
		option.WithHTTPClient(&http.Client{Transport: tr}),
		// The embedder retries documents itself, and a query must answer
		// promptly: a provider that is down degrades the search at once.
		option.WithMaxRetries(0),
	}
	if apiKey != "" {
		opts = append(opts, option.WithAPIKey(apiKey))
	}
	return &openAIEmbedder{svc: openai.NewEmbeddingService(opts...), tr: tr, model: model, maxBytes: TokensToBytes(maxInputTokens), apiKey: apiKey}
}

func (e *openAIEmbedder) Model() string { return e.model }

// Close lets go of the connections the client keeps open (and their
// goroutines); whoever made the embedder closes it once nothing uses it.
func (e *openAIEmbedder) Close() error {
	e.tr.CloseIdleConnections()
	return nil
}
func (e *openAIEmbedder) MaxInputBytes() int { return e.maxBytes }

func (e *openAIEmbedder) Embed(ctx context.Context, inputs []string) ([][]float32, error) {
	if err := checkInputs(e, inputs); err != nil || len(inputs) == 0 {
		return nil, err
	}
	res, err := e.svc.New(ctx, openai.EmbeddingNewParams{
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
		Model:          openai.EmbeddingModel(e.model),
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	})
	if err != nil {
		return nil, e.scrub(err)
	}
	if len(res.Data) != len(inputs) {
		return nil, fmt.Errorf("search: the embeddings provider answered %d vectors for %d inputs", len(res.Data), len(inputs))
	}
	out := make([][]float32, len(inputs))
	for _, d := range res.Data {
		if d.Index < 0 || int(d.Index) >= len(out) || out[d.Index] != nil || len(d.Embedding) == 0 {
			return nil, fmt.Errorf("search: the embeddings provider answered a vector for input %d, which is out of place", d.Index)
		}
		v := make([]float32, len(d.Embedding))
		for i, f := range d.Embedding {
			v[i] = float32(f)
		}
		out[d.Index] = v
	}
	return out, nil
}

// scrub keeps the API key out of an error's text, whatever the provider
// echoed back.
func (e *openAIEmbedder) scrub(err error) error {
	if e.apiKey == "" || !strings.Contains(err.Error(), e.apiKey) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), e.apiKey, "[REDACTED]"))
}

// checkInputs refuses, before anything is sent, an input the model cannot
// take whole (OUT-2, OUT-3).
func checkInputs(e Embedder, inputs []string) error {
	for i, in := range inputs {
		if in == "" {
			return fmt.Errorf("search: input %d is empty; there is nothing to embed", i)
		}
		if len(in) > e.MaxInputBytes() {
			return &InputTooLong{Index: i, Bytes: len(in), Max: e.MaxInputBytes(), Model: e.Model()}
		}
	}
	return nil
}
