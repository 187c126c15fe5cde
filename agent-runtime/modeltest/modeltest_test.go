package modeltest

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var script = Steps(Reply{Text: "looking", Calls: []Call{{Name: "search", Args: map[string]any{"q": "hello world"}}}, Input: 11, Output: 7})

// A client that asks for a stream gets the answer in chunks that the
// vendor's own accumulator puts back together: text, a tool call whose
// arguments arrive in pieces, and the usage.
func TestChatStreaming(t *testing.T) {
	srv := Start(t, script)
	svc := openai.NewChatCompletionService(option.WithBaseURL(srv.OpenAIBase()+"/"), option.WithMaxRetries(0))
	stream := svc.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         "m",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		Tools:         []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "search"})},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if msg.Content != "looking" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "search" ||
		msg.ToolCalls[0].Function.Arguments != `{"q":"hello world"}` || acc.Usage.TotalTokens != 18 {
		t.Fatalf("accumulated %+v usage %+v", msg, acc.Usage)
	}
	if got := srv.Requests(); len(got) != 1 || !got[0].Stream || !got[0].Offers("search") {
		t.Fatalf("recorded %+v", got)
	}
}

// The Messages API's own stream, accumulated by the vendor's client.
func TestMessagesStreaming(t *testing.T) {
	srv := Start(t, script)
	svc := anthropic.NewMessageService(aoption.WithBaseURL(srv.URL()+"/"), aoption.WithAPIKey("k"), aoption.WithMaxRetries(0))
	stream := svc.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != "looking" || msg.Content[1].Name != "search" || msg.Usage.OutputTokens != 7 {
		t.Fatalf("accumulated %+v", msg)
	}
	var in map[string]string
	if err := json.Unmarshal(msg.Content[1].Input, &in); err != nil || in["q"] != "hello world" {
		t.Fatalf("input %s %v", msg.Content[1].Input, err)
	}
}

// A held answer is released when the server closes, so a test that kills
// its client mid-answer leaves nothing behind.
func TestHoldReleasedOnClose(t *testing.T) {
	hold := make(chan struct{})
	srv := Start(t, Steps(Reply{Text: "late", Hold: hold}))
	svc := openai.NewChatCompletionService(option.WithBaseURL(srv.OpenAIBase()+"/"), option.WithMaxRetries(0))
	done := make(chan error, 1)
	go func() {
		_, err := svc.New(t.Context(), openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		done <- err
	}()
	if err := srv.WaitFor(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("answered before the hold: %v", err)
	default:
	}
	srv.Close()
	if err := <-done; err == nil {
		t.Fatal("a held answer came back after the server closed")
	}
}
