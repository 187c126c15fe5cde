package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crewlet/hub/servers/upstream"
)

// Provider is a model vendor's endpoint, named in the company file's
// providers block and referred to by name from models. The same block
// serves search's embeddings now and the agent runtime's chat models
// later.
type Provider struct {
	// API is the vendor protocol: openai (chat and embeddings, spoken by
	// OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio) or anthropic
	// (chat, the Messages API).
	API string `yaml:"api"`
	// BaseURL is the API's root (".../v1" for openai); the vendor's own
	// when empty.
	BaseURL string `yaml:"base_url"`
	// APIKey is a ${VAR} reference; a local server may need none.
	APIKey string `yaml:"api_key"`
}

// Models names the models the hub uses, each at a provider.
type Models struct {
	// Embeddings turns text into vectors for search by meaning; without
	// it search is keyword only, and says so.
	Embeddings *ModelRef `yaml:"embeddings"`
	// Default is the chat model of every agent seat that names none of
	// its own (chat.go); Auxiliary is the smaller one a seat condenses and
	// judges with, the default's when unset.
	Default   *ModelRef `yaml:"default"`
	Auxiliary *ModelRef `yaml:"auxiliary"`
}

// ModelRef is one model at one provider.
type ModelRef struct {
	Provider string `yaml:"provider"`
	Model    string `yaml:"model"`
	// MaxInputTokens is the model's documented input limit; a model the
	// hub knows has it by default (KnownMaxInputTokens). Embeddings only.
	MaxInputTokens int `yaml:"max_input_tokens"`
	// MaxOutputTokens bounds one answer of a chat model (the Messages
	// API requires a bound); DefaultMaxOutputTokens when 0. Chat only.
	MaxOutputTokens int `yaml:"max_output_tokens"`
}

// APIs a provider may speak, and the vendors' own endpoints.
var providerAPIs = map[string]string{
	"openai":    "https://api.openai.com/v1",
	"anthropic": "https://api.anthropic.com",
}

// minInputTokens is the smallest model limit worth embedding with: below
// it the room a tokenizer keeps for its own tokens leaves nothing.
const minInputTokens = 32

// checkModels applies the rules of providers and models.
func (c *Company) checkModels(add func(string, ...any)) {
	names := make([]string, 0, len(c.Providers))
	for name := range c.Providers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, at := c.Providers[name], "providers."+name
		if !slugRe.MatchString(name) {
			add("%s: %q must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", at, name)
		}
		switch _, ok := providerAPIs[p.API]; {
		case p.API == "":
			add("%s.api: is required (openai or anthropic)", at)
		case !ok:
			add("%s.api: %q is not one of anthropic, openai", at, p.API)
		}
		if u := p.BaseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "${") {
			add("%s.base_url: %q is not an http(s) URL", at, u)
		}
		if p.APIKey != "" && !wholeRefRe.MatchString(p.APIKey) {
			add("%s.api_key: write the key as a ${VARIABLE} reference; a secret does not belong in the company file", at)
		}
	}
	c.checkChatModels(add)
	e := c.Models.Embeddings
	if e == nil {
		return
	}
	if e.MaxOutputTokens != 0 {
		add("models.embeddings.max_output_tokens: an embeddings model answers vectors, not text; remove it")
	}
	const at = "models.embeddings"
	switch p, ok := c.Providers[e.Provider]; {
	case e.Provider == "":
		add("%s.provider: is required (a name under providers)", at)
	case !ok:
		add("%s.provider: no provider is called %q", at, e.Provider)
	case p.API == "anthropic":
		add("%s.provider: %q speaks the anthropic API, which serves chat models, not embeddings; name a provider with api: openai", at, e.Provider)
	}
	if strings.TrimSpace(e.Model) == "" {
		add("%s.model: is required", at)
	}
	switch _, known := KnownMaxInputTokens(e.Model); {
	case e.MaxInputTokens < 0:
		add("%s.max_input_tokens: %d is out of range (gte %d)", at, e.MaxInputTokens, minInputTokens)
	case e.MaxInputTokens == 0 && !known && strings.TrimSpace(e.Model) != "":
		add("%s.max_input_tokens: the hub does not know the input limit of %q; write the model's documented limit, in tokens", at, e.Model)
	case e.MaxInputTokens > 0 && e.MaxInputTokens < minInputTokens:
		add("%s.max_input_tokens: %d is out of range (gte %d)", at, e.MaxInputTokens, minInputTokens)
	}
}

// KnownMaxInputTokens is the documented input limit of an embeddings model
// the hub knows, by name; an Ollama-style tag after ':' is ignored
// ("nomic-embed-text:v1.5"). A model not listed needs its limit written in
// the company file (models.embeddings.max_input_tokens).
func KnownMaxInputTokens(model string) (int, bool) {
	name, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(model)), ":")
	n, ok := knownModels[name]
	return n, ok
}

// knownModels are vendors' documented input limits, in tokens.
var knownModels = map[string]int{
	"text-embedding-3-small": 8191,
	"text-embedding-3-large": 8191,
	"text-embedding-ada-002": 8191,
	"nomic-embed-text":       8192,
	"mxbai-embed-large":      512,
	"all-minilm":             256,
	"bge-m3":                 8192,
	"snowflake-arctic-embed": 512,
}

// EmbeddingsSpec is the embeddings model of a revision, resolved.
type EmbeddingsSpec struct {
	Provider       string
	BaseURL        string
	APIKey         string // a secret: never logged or answered
	Model          string
	MaxInputTokens int
}

// String names the model and where it is, never the key.
func (s EmbeddingsSpec) String() string {
	return fmt.Sprintf("%s at %s (%s, %d tokens)", s.Model, s.Provider, s.BaseURL, s.MaxInputTokens)
}

// Embeddings resolves the revision's embeddings model against env. ok is
// false when the revision names none. A ${VAR} that does not resolve is
// an error naming it, never an empty value sent on.
func (c *Company) Embeddings(env Lookup) (spec EmbeddingsSpec, ok bool, err error) {
	e := c.Models.Embeddings
	if e == nil {
		return EmbeddingsSpec{}, false, nil
	}
	spec = EmbeddingsSpec{Provider: e.Provider, Model: e.Model, MaxInputTokens: e.MaxInputTokens}
	if spec.MaxInputTokens == 0 {
		spec.MaxInputTokens, _ = KnownMaxInputTokens(e.Model)
	}
	spec.BaseURL, spec.APIKey, err = c.resolveProvider(e.Provider, env)
	if err != nil {
		return EmbeddingsSpec{}, true, err
	}
	return spec, true, nil
}

// providerValues lists what the providers' ${VAR}s resolve to, for the
// sanitiser: an API key is a credential like any other.
func (c *Company) providerValues(lookup Lookup) []string {
	var out []string
	for _, p := range c.Providers {
		for _, v := range []string{p.APIKey, p.BaseURL} {
			for _, name := range upstream.References(v) {
				if val, ok := lookup(name); ok && val != "" {
					out = append(out, val)
				}
			}
		}
	}
	return out
}
