package config

import (
	"fmt"
	"strings"

	"github.com/crewlet/hub/servers/upstream"
)

// DefaultMaxOutputTokens bounds one answer of a chat model whose entry
// sets no max_output_tokens: room for a long remark and a few tool calls,
// and within what every model the hub is pointed at accepts.
const DefaultMaxOutputTokens = 4096

// Names a role's model: may take besides "provider/model".
const (
	ModelDefault   = "default"
	ModelAuxiliary = "auxiliary"
)

// ChatSpec is one seat's chat model, resolved against the environment.
type ChatSpec struct {
	// Name is how the company file names it: default, auxiliary or
	// provider/model.
	Name     string
	Provider string
	// API is the protocol spoken: openai (chat completions) or anthropic
	// (Messages).
	API             string
	BaseURL         string
	APIKey          string // a secret: never logged or answered
	Model           string
	MaxOutputTokens int
}

// String names the model and where it is, never the key.
func (s ChatSpec) String() string {
	return fmt.Sprintf("%s at %s (%s, %s)", s.Model, s.Provider, s.API, s.BaseURL)
}

// checkChatModels applies the rules of models.default and models.auxiliary.
func (c *Company) checkChatModels(add func(string, ...any)) {
	for _, m := range []struct {
		at  string
		ref *ModelRef
	}{{"models.default", c.Models.Default}, {"models.auxiliary", c.Models.Auxiliary}} {
		if m.ref == nil {
			continue
		}
		switch _, ok := c.Providers[m.ref.Provider]; {
		case m.ref.Provider == "":
			add("%s.provider: is required (a name under providers)", m.at)
		case !ok:
			add("%s.provider: no provider is called %q", m.at, m.ref.Provider)
		}
		if strings.TrimSpace(m.ref.Model) == "" {
			add("%s.model: is required", m.at)
		}
		if m.ref.MaxInputTokens != 0 {
			add("%s.max_input_tokens: is the embeddings model's input limit; a chat model takes max_output_tokens", m.at)
		}
		if m.ref.MaxOutputTokens < 0 || m.ref.MaxOutputTokens > 1_000_000 {
			add("%s.max_output_tokens: %d is out of range (1 to 1000000)", m.at, m.ref.MaxOutputTokens)
		}
	}
}

// checkRoleModel applies the rules of a role's model and instructions.
func (c *Company) checkRoleModel(p string, r Role, add func(string, ...any)) {
	if r.kind() == "human" {
		if r.Model != "" {
			add("%s.model: a person runs no turns, so a human seat takes no model", p)
		}
		if r.Instructions != "" {
			add("%s.instructions: a person runs no turns, so a human seat takes no instructions", p)
		}
		return
	}
	switch name := r.Model; {
	case name == "":
	case name == ModelDefault:
		if c.Models.Default == nil {
			add("%s.model: %q names models.default, which the file does not declare", p, name)
		}
	case name == ModelAuxiliary:
		if c.Models.Auxiliary == nil && c.Models.Default == nil {
			add("%s.model: %q names models.auxiliary, which the file does not declare", p, name)
		}
	default:
		provider, model, ok := strings.Cut(name, "/")
		switch _, known := c.Providers[provider]; {
		case !ok || strings.TrimSpace(model) == "":
			add("%s.model: %q is not default, auxiliary or provider/model (local/qwen3:8b)", p, name)
		case !known:
			add("%s.model: no provider is called %q", p, provider)
		}
	}
}

// role finds a seat's role by handle.
func (c *Company) role(handle string) (Role, bool) {
	for _, u := range c.Units {
		for _, r := range u.Roles {
			if strings.EqualFold(r.Handle, handle) {
				return r, true
			}
		}
	}
	for _, r := range c.Roles {
		if strings.EqualFold(r.Handle, handle) {
			return r, true
		}
	}
	return Role{}, false
}

// SeatModel resolves the chat model an agent seat runs its turns on: its
// role's model, else models.default. ok is false for a seat that has none
// (or is not an agent seat); a ${VAR} that does not resolve is an error
// naming it, never an empty key sent on.
func (c *Company) SeatModel(handle string, env Lookup) (spec ChatSpec, ok bool, err error) {
	r, found := c.role(handle)
	if !found || r.kind() != "agent" {
		return ChatSpec{}, false, nil
	}
	name := r.Model
	if name == "" {
		name = ModelDefault
	}
	return c.chatModel(name, env)
}

// AuxiliaryModel resolves the model a seat condenses and judges with:
// models.auxiliary, else the seat's own.
func (c *Company) AuxiliaryModel(handle string, env Lookup) (ChatSpec, bool, error) {
	if c.Models.Auxiliary != nil {
		return c.chatModel(ModelAuxiliary, env)
	}
	return c.SeatModel(handle, env)
}

// SeatInstructions is what an agent seat's role tells its model beyond
// who it is.
func (c *Company) SeatInstructions(handle string) string {
	r, _ := c.role(handle)
	return r.Instructions
}

// chatModel resolves a model by the name a role gives it.
func (c *Company) chatModel(name string, env Lookup) (ChatSpec, bool, error) {
	var ref ModelRef
	switch name {
	case ModelDefault:
		if c.Models.Default == nil {
			return ChatSpec{}, false, nil
		}
		ref = *c.Models.Default
	case ModelAuxiliary:
		switch {
		case c.Models.Auxiliary != nil:
			ref = *c.Models.Auxiliary
		case c.Models.Default != nil:
			ref = *c.Models.Default
		default:
			return ChatSpec{}, false, nil
		}
	default:
		provider, model, _ := strings.Cut(name, "/")
		ref = ModelRef{Provider: provider, Model: model}
	}
	p, known := c.Providers[ref.Provider]
	if !known {
		return ChatSpec{}, true, Violations{fmt.Sprintf("model %q: no provider is called %q", name, ref.Provider)}
	}
	base, key, err := c.resolveProvider(ref.Provider, env)
	if err != nil {
		return ChatSpec{}, true, err
	}
	spec := ChatSpec{Name: name, Provider: ref.Provider, API: p.API, BaseURL: base, APIKey: key, Model: ref.Model,
		MaxOutputTokens: ref.MaxOutputTokens}
	if spec.MaxOutputTokens == 0 {
		spec.MaxOutputTokens = DefaultMaxOutputTokens
	}
	return spec, true, nil
}

// resolveProvider is a provider's base URL (the vendor's own when unset)
// and key, their ${VAR}s resolved; one that does not resolve is named.
func (c *Company) resolveProvider(name string, env Lookup) (baseURL, apiKey string, err error) {
	p := c.Providers[name]
	var bad Violations
	resolve := func(field, v string) string {
		val, missing := upstream.Expand(v, upstream.Lookup(env))
		for _, m := range missing {
			bad = append(bad, fmt.Sprintf("providers.%s.%s: the variable %s is not set (or is empty) in the hub's secret store or environment", name, field, m))
		}
		return val
	}
	baseURL = p.BaseURL
	if baseURL == "" {
		baseURL = providerAPIs[p.API]
	}
	baseURL = resolve("base_url", baseURL)
	if p.APIKey != "" {
		apiKey = resolve("api_key", p.APIKey)
	}
	if len(bad) > 0 {
		return "", "", bad
	}
	return baseURL, apiKey, nil
}
