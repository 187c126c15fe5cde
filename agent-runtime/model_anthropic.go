package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicModel speaks the Messages API with tool use.
type anthropicModel struct {
	spec ModelSpec
	tr   *http.Transport
	svc  anthropic.MessageService
}

func newAnthropicModel(spec ModelSpec) *anthropicModel {
	client, tr := modelHTTP()
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(spec.BaseURL, "/") + "/"),
		option.WithHTTPClient(client),
		option.WithMaxRetries(2),
	}
	if spec.APIKey != "" {
		opts = append(opts, option.WithAPIKey(spec.APIKey))
	}
	// The service, not the client: anthropic.NewClient would read
	// ANTHROPIC_* and profile files from the hub's environment.
	return &anthropicModel{spec: spec, tr: tr, svc: anthropic.NewMessageService(opts...)}
}

// closeIdle lets go of the client's idle connections.
func (m *anthropicModel) closeIdle() { m.tr.CloseIdleConnections() }

func (m *anthropicModel) Name() string { return m.spec.Model + " at " + m.spec.Provider }

func (m *anthropicModel) Complete(ctx context.Context, req Request) (Reply, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.spec.Model),
		MaxTokens: int64(max(m.spec.MaxOutputTokens, 1)),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, msg := range req.Messages {
		m := anthropicMessage(msg)
		// A note read after tool results is one more user message: the
		// API takes a conversation whose turns alternate, so it joins
		// the user message before it.
		if n := len(params.Messages); n > 0 && m.OfUser != nil && params.Messages[n-1].OfUser != nil {
			prev := params.Messages[n-1].OfUser
			prev.Content = append(prev.Content, m.OfUser.Content...)
			continue
		}
		params.Messages = append(params.Messages, m)
	}
	for _, t := range req.Tools {
		schema := schemaObject(t.Schema)
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "properties" && k != "required" && k != "type" {
				in.ExtraFields[k] = v
			}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	res, err := m.svc.New(ctx, params)
	if err != nil {
		return Reply{}, scrubKey(err, m.spec.APIKey)
	}
	var rep Reply
	var text []string
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			rep.Calls = append(rep.Calls, ToolCall{ID: b.ID, Name: b.Name, Args: argsOrEmpty(b.Input)})
		}
	}
	rep.Text = strings.Join(text, "\n")
	u := res.Usage
	rep.Usage = fillUsage(Usage{Input: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, Output: u.OutputTokens}, req, rep)
	return rep, nil
}

// anthropicMessage renders one message: tool results travel in a user
// message, as the API has them.
func anthropicMessage(msg Message) anthropic.MessageParam {
	switch msg.From {
	case FromModel:
		var blocks []anthropic.ContentBlockParamUnion
		if msg.Text != "" {
			blocks = append(blocks, anthropic.NewTextBlock(msg.Text))
		}
		for _, c := range msg.Calls {
			blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, json.RawMessage(argsOrEmpty(c.Args)), c.Name))
		}
		return anthropic.NewAssistantMessage(blocks...)
	case FromTools:
		blocks := make([]anthropic.ContentBlockParamUnion, 0, len(msg.Results))
		for _, r := range msg.Results {
			blocks = append(blocks, anthropic.NewToolResultBlock(r.CallID, r.Text, r.IsError))
		}
		return anthropic.NewUserMessage(blocks...)
	default:
		return anthropic.NewUserMessage(anthropic.NewTextBlock(msg.Text))
	}
}
