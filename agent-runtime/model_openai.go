package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openAIModel speaks the chat-completions API with tool calls: OpenAI,
// Ollama, vLLM, llama.cpp's server, LM Studio.
type openAIModel struct {
	spec ModelSpec
	tr   *http.Transport
	svc  openai.ChatCompletionService
}

func newOpenAIModel(spec ModelSpec) *openAIModel {
	client, tr := modelHTTP()
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(spec.BaseURL, "/") + "/"),
		option.WithHTTPClient(client),
		// A rate limit or a restarting local server is retried, briefly;
		// a turn waits on the call, and a provider that stays down ends it.
		option.WithMaxRetries(2),
	}
	if spec.APIKey != "" {
		opts = append(opts, option.WithAPIKey(spec.APIKey))
	}
	// The service, not the client: openai.NewClient would read OPENAI_*
	// from the hub's environment and send what the company never named.
	return &openAIModel{spec: spec, tr: tr, svc: openai.NewChatCompletionService(opts...)}
}

// closeIdle lets go of the client's idle connections.
func (m *openAIModel) closeIdle() { m.tr.CloseIdleConnections() }

func (m *openAIModel) Name() string { return m.spec.Model + " at " + m.spec.Provider }

func (m *openAIModel) Complete(ctx context.Context, req Request) (Reply, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.spec.Model)}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		params.Messages = append(params.Messages, openAIMessages(msg)...)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schemaObject(t.Schema))}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if m.spec.MaxOutputTokens > 0 {
		// max_tokens rather than max_completion_tokens: every
		// OpenAI-compatible server reads it.
		params.MaxTokens = openai.Int(int64(m.spec.MaxOutputTokens))
	}
	res, err := m.svc.New(ctx, params)
	if err != nil {
		return Reply{}, scrubKey(err, m.spec.APIKey)
	}
	if len(res.Choices) == 0 {
		return Reply{}, fmt.Errorf("agent: %s answered no choice", m.Name())
	}
	msg := res.Choices[0].Message
	rep := Reply{Text: msg.Content}
	for i, c := range msg.ToolCalls {
		if c.Type != "" && c.Type != "function" {
			continue
		}
		id := c.ID
		if id == "" {
			// Some local servers leave the id out; the result must still
			// name the call it answers.
			id = fmt.Sprintf("call_%d", i)
		}
		rep.Calls = append(rep.Calls, ToolCall{ID: id, Name: c.Function.Name, Args: argsOrEmpty(json.RawMessage(c.Function.Arguments))})
	}
	rep.Usage = fillUsage(Usage{Input: res.Usage.PromptTokens, Output: res.Usage.CompletionTokens}, req, rep)
	return rep, nil
}

// openAIMessages renders one message: a tool message per result, since
// the API answers each call in a message of its own.
func openAIMessages(msg Message) []openai.ChatCompletionMessageParamUnion {
	switch msg.From {
	case FromModel:
		a := openai.ChatCompletionAssistantMessageParam{}
		if msg.Text != "" {
			a.Content.OfString = openai.String(msg.Text)
		}
		for _, c := range msg.Calls {
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(argsOrEmpty(c.Args))},
				},
			})
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: &a}}
	case FromTools:
		out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msg.Results))
		for _, r := range msg.Results {
			out = append(out, openai.ToolMessage(r.Text, r.CallID))
		}
		return out
	default:
		return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msg.Text)}
	}
}
