package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// A turn talks to its seat's model through Model: one request, one reply,
// in the hub's own words. The two vendors' protocols (chat completions,
// the Messages API) are adapters over their maintained SDKs
// (model_openai.go, model_anthropic.go), so the turn loop knows nothing
// about either wire format.

// Speaker says who a message of the conversation is from.
type Speaker string

const (
	// FromUser is the turn's trigger and the engine's own notes to the
	// model (a reminder that nobody was reached).
	FromUser Speaker = "user"
	// FromModel is what the model answered: text, tool calls or both.
	FromModel Speaker = "assistant"
	// FromTools carries the results of the model's tool calls.
	FromTools Speaker = "tool"
)

// Message is one entry of a turn's conversation.
type Message struct {
	From    Speaker
	Text    string
	Calls   []ToolCall   // FromModel
	Results []ToolResult // FromTools: one per call of the message before
}

// ToolCall is one tool call a model asked for. Name is the name the model
// was offered (see wireNames).
type ToolCall struct {
	ID   string
	Name string
	Args json.RawMessage
}

// ToolResult answers one tool call, in full.
type ToolResult struct {
	CallID  string
	Text    string
	IsError bool
}

// ToolDef is a tool as a model is offered it.
type ToolDef struct {
	Name        string
	Description string
	// Schema is the tool's JSON schema for its arguments (an object).
	Schema json.RawMessage
}

// Request is one call of a model.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolDef
}

// Reply is what the model answered.
type Reply struct {
	Text  string
	Calls []ToolCall
	Usage Usage
}

// Usage is the tokens one call spent. Where a server reports none (some
// local servers do not), the adapter estimates it, so a budget still
// counts every call.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// Total is every token of the call.
func (u Usage) Total() int64 { return u.Input + u.Output }

// Add sums two usages.
func (u Usage) Add(v Usage) Usage { return Usage{u.Input + v.Input, u.Output + v.Output} }

// Model answers requests: one seat's model at one provider.
type Model interface {
	Complete(ctx context.Context, req Request) (Reply, error)
	// Name names the model and its provider for logs, never its key.
	Name() string
}

// ModelSpec is a chat model resolved from the company file.
type ModelSpec struct {
	// API is openai (chat completions) or anthropic (Messages).
	API      string
	Provider string
	BaseURL  string
	APIKey   string // a secret: sent only to the provider, never logged
	Model    string
	// MaxOutputTokens bounds one answer.
	MaxOutputTokens int
}

// NewModel builds the client for a spec. The clients read nothing from
// the hub's environment: only what the company file configured is sent.
func NewModel(spec ModelSpec) (Model, error) {
	if strings.TrimSpace(spec.Model) == "" {
		return nil, errors.New("agent: a model needs a name")
	}
	switch spec.API {
	case "openai":
		return newOpenAIModel(spec), nil
	case "anthropic":
		return newAnthropicModel(spec), nil
	}
	return nil, fmt.Errorf("agent: the model API %q is not openai or anthropic", spec.API)
}

// modelHTTP is the HTTP client of a model: its own transport, so a
// node's many seats reuse connections to one provider, and no global
// client's settings leak in. Whoever made it closes the transport's idle
// connections when done.
func modelHTTP() (*http.Client, *http.Transport) {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{Transport: tr}, tr
}

// estimateTokens is a rough count of the tokens a text is: about four
// bytes a token for the languages and JSON a turn carries. It is only
// used where a server reports no usage, and to judge before a call whether
// a budget has room for it.
func estimateTokens(n int) int64 { return int64(n+3) / 4 }

// estimateRequest is about how many input tokens a request is.
func estimateRequest(req Request) int64 {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Text)
		for _, c := range m.Calls {
			n += len(c.Name) + len(c.Args)
		}
		for _, r := range m.Results {
			n += len(r.Text)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Schema)
	}
	return estimateTokens(n)
}

// fillUsage estimates what a server did not report.
func fillUsage(u Usage, req Request, rep Reply) Usage {
	if u.Input == 0 {
		u.Input = estimateRequest(req)
	}
	if u.Output == 0 {
		n := len(rep.Text)
		for _, c := range rep.Calls {
			n += len(c.Name) + len(c.Args)
		}
		u.Output = estimateTokens(n)
	}
	return u
}

// scrubKey keeps an API key out of an error's text, whatever a provider
// echoed back.
func scrubKey(err error, key string) error {
	if err == nil || key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "[REDACTED]"))
}

// schemaObject decodes a tool's schema into a map, an empty object schema
// when it has none.
func schemaObject(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	return m
}

// argsOrEmpty is a call's arguments, an empty object when the model sent
// none (a tool with no parameters).
func argsOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}
