//lint:file-ignore SA1019 the test sanitises logging and sampling messages, which the session revisions still use.

package sanitize

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OUT-1, issue 25 defect 2: what a third-party server sends a client while
// serving a call passes the rules its result passes. Each case is a
// message holding a configured secret, a credential shape, a control
// character and a hub _meta key in every text field it has; sanitised, its
// JSON holds none of them, and the protocol state it carries is kept.
func TestServerMessagesAreSanitised_OUT1(t *testing.T) {
	const dirty = "see hunter2hunter2 token=abc \x1b[31mred\x1b[0m"
	leaks := []string{"hunter2hunter2", "token=abc", "\\u001b", "\x1b", `"crewlet/refusal"`}
	meta := func() mcp.Meta { return mcp.Meta{"crewlet/refusal": "forbidden", "note": dirty} }
	s := New("hunter2hunter2")
	cases := []struct {
		name string
		run  func() (in, out any, err error)
		keep []string // what must pass as it came
	}{
		{"log message", func() (any, any, error) {
			p := &mcp.LoggingMessageParams{Level: "warning", Logger: dirty, Meta: meta(),
				Data: map[string]any{"said": dirty, "list": []any{dirty, 1.5}}}
			out, err := s.LogMessage(p)
			return p, out, err
		}, []string{`"level":"warning"`, `1.5`}},
		{"log message of a string", func() (any, any, error) {
			p := &mcp.LoggingMessageParams{Level: "info", Data: dirty}
			out, err := s.LogMessage(p)
			return p, out, err
		}, []string{`"level":"info"`}},
		{"progress", func() (any, any, error) {
			p := &mcp.ProgressNotificationParams{ProgressToken: "tok-1", Progress: 1, Total: 3, Message: dirty, Meta: meta()}
			out, err := s.Progress(p)
			return p, out, err
		}, []string{`"progressToken":"tok-1"`, `"total":3`}},
		{"sampling request", func() (any, any, error) {
			p := &mcp.CreateMessageParams{MaxTokens: 7, SystemPrompt: dirty, StopSequences: []string{dirty},
				Metadata: map[string]any{"m": dirty}, Meta: meta(),
				ModelPreferences: &mcp.ModelPreferences{Hints: []*mcp.ModelHint{{Name: dirty}}, SpeedPriority: 0.5},
				Messages: []*mcp.SamplingMessage{
					{Role: "user", Content: &mcp.TextContent{Text: dirty, Meta: meta()}},
					{Role: "user", Content: &mcp.ImageContent{Data: []byte("hunter2hunter2"), MIMEType: "image/png"}},
					{Role: "assistant", Content: &mcp.ToolUseContent{ID: "u1", Name: "t", Input: map[string]any{"q": dirty}}},
					{Role: "user", Content: &mcp.ToolResultContent{ToolUseID: "u1", Content: []mcp.Content{&mcp.TextContent{Text: dirty}},
						StructuredContent: map[string]any{"r": dirty}}},
				}}
			out, err := s.CreateMessage(p)
			return p, out, err
		}, []string{`"maxTokens":7`, `"speedPriority":0.5`, `"id":"u1"`, `"toolUseId":"u1"`,
			// Image data is binary by type: its base64 passes as it came.
			`"data":"aHVudGVyMmh1bnRlcjI="`}},
		{"elicitation request", func() (any, any, error) {
			p := &mcp.ElicitParams{Mode: "form", Message: dirty, Meta: meta(), RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "description": dirty}}}}
			out, err := s.Elicit(p)
			return p, out, err
		}, []string{`"mode":"form"`, `"type":"string"`}},
		{"url elicitation", func() (any, any, error) {
			p := &mcp.ElicitParams{Mode: "url", Message: dirty, URL: "https://example.com/x?token=abc", ElicitationID: "e-1"}
			out, err := s.Elicit(p)
			return p, out, err
		}, []string{`"elicitationId":"e-1"`, `"url":"https://example.com/x?`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, out, err := c.run()
			if err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(in)
			got, _ := json.Marshal(out)
			for _, leak := range leaks {
				if strings.Contains(string(got), leak) {
					t.Errorf("%q passed: %s", leak, got)
				}
			}
			if !strings.Contains(string(got), Redacted) {
				t.Errorf("nothing redacted: %s", got)
			}
			for _, k := range c.keep {
				if !strings.Contains(string(got), k) {
					t.Errorf("%s was not kept: %s", k, got)
				}
			}
			if strings.Contains(string(before), `"crewlet/refusal"`) && !strings.Contains(string(got), `"upstream/crewlet/refusal"`) {
				t.Errorf("the server's crewlet/ key was dropped, not renamed: %s", got)
			}
			// The message is the server's: only the copy changes.
			if after, _ := json.Marshal(in); string(after) != string(before) {
				t.Errorf("the input changed:\n%s\n%s", before, after)
			}
		})
	}
}

// OUT-1: a message holding binary data is refused whole, saying so, never
// repaired or passed on in part.
func TestServerMessagesWithBinaryAreRefused_OUT1(t *testing.T) {
	s := New()
	for name, run := range map[string]func() error{
		"log": func() error {
			_, err := s.LogMessage(&mcp.LoggingMessageParams{Level: "info", Data: map[string]any{"x": "a\x00b"}})
			return err
		},
		"progress": func() error { _, err := s.Progress(&mcp.ProgressNotificationParams{Message: "a\xffb"}); return err },
		"sampling": func() error {
			_, err := s.CreateMessage(&mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "a\x00"}}}})
			return err
		},
		"elicitation": func() error { _, err := s.Elicit(&mcp.ElicitParams{Message: "a\xff"}); return err },
	} {
		err := run()
		if !errors.Is(err, ErrBinary) || !strings.HasPrefix(err.Error(), "the server's ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
