//lint:file-ignore SA1019 the test sanitises logging and sampling messages, which the session revisions still use.

package sanitize

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fixtures of the tests that hold a server's messages and features to
// the result rules: a text holding a configured secret, a credential
// shape and a control character, what of it must never come out, and a
// _meta that also holds a hub key.
const (
	dirtySecret = "hunter2hunter2"
	dirtyText   = "see hunter2hunter2 token=abc \x1b[31mred\x1b[0m"
)

var dirtyLeaks = []string{dirtySecret, "token=abc", "\\u001b", "\x1b", `"crewlet/refusal"`}

func dirtyMeta() mcp.Meta { return mcp.Meta{"crewlet/refusal": "forbidden", "note": dirtyText} }

// OUT-1, issue 25 defect 2: what a third-party server sends a client while
// serving a call passes the rules its result passes. Each case is a
// message holding a configured secret, a credential shape, a control
// character and a hub _meta key in every text field it has; sanitised, its
// JSON holds none of them, and the protocol state it carries is kept.
func TestServerMessagesAreSanitised_OUT1(t *testing.T) {
	dirty, leaks, meta, s := dirtyText, dirtyLeaks, dirtyMeta, New(dirtySecret)
	cases := []struct {
		name string
		// run builds the message and how to sanitise it, apart, so the
		// input is recorded before the sanitiser sees it.
		run  func() (in any, clean func() (any, error))
		keep []string // what must pass as it came
	}{
		{"log message", func() (any, func() (any, error)) {
			p := &mcp.LoggingMessageParams{Level: "warning", Logger: dirty, Meta: meta(),
				Data: map[string]any{"said": dirty, "list": []any{dirty, 1.5}}}
			return p, func() (any, error) { return s.LogMessage(p) }
		}, []string{`"level":"warning"`, `1.5`}},
		{"log message of a string", func() (any, func() (any, error)) {
			p := &mcp.LoggingMessageParams{Level: "info", Data: dirty}
			return p, func() (any, error) { return s.LogMessage(p) }
		}, []string{`"level":"info"`}},
		{"progress", func() (any, func() (any, error)) {
			p := &mcp.ProgressNotificationParams{ProgressToken: "tok-1", Progress: 1, Total: 3, Message: dirty, Meta: meta()}
			return p, func() (any, error) { return s.Progress(p) }
		}, []string{`"progressToken":"tok-1"`, `"total":3`}},
		{"sampling request", func() (any, func() (any, error)) {
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
			return p, func() (any, error) { return s.CreateMessage(p) }
		}, []string{`"maxTokens":7`, `"speedPriority":0.5`, `"id":"u1"`, `"toolUseId":"u1"`,
			// Image data is binary by type: its base64 passes as it came.
			`"data":"aHVudGVyMmh1bnRlcjI="`}},
		{"elicitation request", func() (any, func() (any, error)) {
			p := &mcp.ElicitParams{Mode: "form", Message: dirty, Meta: meta(), RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "description": dirty}}}}
			return p, func() (any, error) { return s.Elicit(p) }
		}, []string{`"mode":"form"`, `"type":"string"`}},
		{"url elicitation", func() (any, func() (any, error)) {
			p := &mcp.ElicitParams{Mode: "url", Message: dirty, URL: "https://example.com/x?token=abc", ElicitationID: "e-1"}
			return p, func() (any, error) { return s.Elicit(p) }
		}, []string{`"elicitationId":"e-1"`, `"url":"https://example.com/x?`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, clean := c.run()
			before, _ := json.Marshal(in)
			out, err := clean()
			if err != nil {
				t.Fatal(err)
			}
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

// FuzzServerMessages: whatever a server's log line, progress or
// elicitation request holds, sanitised it holds no configured secret in any
// string or key, and no _meta key of its own that speaks as the hub (OUT-1;
// issue 25 defects 2 and 6). The input is the message's params as JSON;
// kind picks which message it is.
func FuzzServerMessages(f *testing.F) {
	for _, seed := range []string{
		`{"level":"warning","logger":"hunter2hunter2","data":{"said":"key fuzz-secret-1234","n":[1,"abcdefgh"]},"_meta":{"crewlet/refusal":"forbidden"}}`,
		`{"level":"info","data":"Authorization: Bearer abcdefgh12345 \u001b[1m"}`,
		`{"progressToken":"t","progress":1,"message":"step hunter2hunter2","_meta":{"upstream/crewlet/x":1,"crewlet/x":2}}`,
		`{"mode":"form","message":"give abcdefgh","requestedSchema":{"type":"object","properties":{"hunter2hunter2":{"type":"string","default":"fuzz-secret-1234"}}}}`,
		`{"mode":"url","url":"https://x.test/?token=hunter2hunter2","elicitationId":"e"}`,
		`{"data":{"crewlet/refusal":"x","\u0063rewlet/y":"fuzz-secret-1234"},"_meta":{"\u0063rewlet/refusal":"y"}}`,
	} {
		for kind := range byte(3) {
			f.Add(kind, seed)
		}
	}
	s := New(fuzzSecrets...)
	f.Fuzz(func(t *testing.T, kind byte, raw string) {
		var out any
		var meta mcp.Meta
		var err error
		switch kind % 3 {
		case 0:
			var p mcp.LoggingMessageParams
			if json.Unmarshal([]byte(raw), &p) != nil {
				return
			}
			var c *mcp.LoggingMessageParams
			if c, err = s.LogMessage(&p); err == nil {
				out, meta = c, c.Meta
			}
		case 1:
			var p mcp.ProgressNotificationParams
			if json.Unmarshal([]byte(raw), &p) != nil {
				return
			}
			var c *mcp.ProgressNotificationParams
			if c, err = s.Progress(&p); err == nil {
				// The token is the client's own, passed as it came.
				c.ProgressToken = nil
				out, meta = c, c.Meta
			}
		default:
			var p mcp.ElicitParams
			if json.Unmarshal([]byte(raw), &p) != nil {
				return
			}
			var c *mcp.ElicitParams
			if c, err = s.Elicit(&p); err == nil {
				// The id is protocol state the client echoes, passed as
				// it came.
				c.ElicitationID = ""
				out, meta = c, c.Meta
			}
		}
		if err != nil {
			return
		}
		for k := range meta {
			if strings.HasPrefix(k, HubMetaPrefix) {
				t.Fatalf("input %q: the hub's key %q passed", raw, k)
			}
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("input %q: %v", raw, err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("input %q: %v", raw, err)
		}
		eachString(v, func(str string) {
			for _, secret := range fuzzSecrets {
				if strings.Contains(str, secret) {
					t.Fatalf("input %q: %q passed in %q", raw, secret, str)
				}
			}
		})
	})
}

// eachString calls fn with every string of a decoded JSON value, keys
// included.
func eachString(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, e := range x {
			eachString(e, fn)
		}
	case map[string]any:
		for k, e := range x {
			fn(k)
			eachString(e, fn)
		}
	}
}
