package sanitize

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OUT-1, issue 25: what a third-party server offers of its resources and
// prompts (a listing, a read, a prompt, a completion, an update) passes the
// rules a tool's result passes. Each case holds a configured secret, a
// credential shape, a control character and a hub _meta key in every text
// field it has; sanitised, its JSON holds none of them, blobs and protocol
// state pass as they came, and the input is not changed.
func TestFeaturesAreSanitised_OUT1(t *testing.T) {
	dirty, leaks, meta, s := dirtyText, dirtyLeaks, dirtyMeta, New(dirtySecret)
	cases := []struct {
		name string
		in   any
		keep []string // what must pass as it came
	}{
		{"resource read", &mcp.ReadResourceResult{Meta: meta(), Cacheable: mcp.Cacheable{TTLMs: 900}, Contents: []*mcp.ResourceContents{
			{URI: "test://a/" + dirty, MIMEType: "text/" + dirty, Text: dirty, Meta: meta()},
			// A blob is binary by type: the secret's bytes pass, base64
			// on the wire, as an image's do.
			{URI: "test://b", MIMEType: "application/octet-stream", Blob: []byte("hunter2hunter2")},
		}}, []string{`"ttlMs":900`, `"uri":"test://b"`, `"blob":"aHVudGVyMmh1bnRlcjI="`}},
		{"prompt", &mcp.GetPromptResult{Description: dirty, Meta: meta(), Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.TextContent{Text: dirty, Meta: meta()}},
			{Role: "assistant", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://e", Text: dirty, Meta: meta()}}},
			{Role: "user", Content: &mcp.ResourceLink{URI: "test://l", Name: dirty, Description: dirty}},
			{Role: "user", Content: &mcp.ImageContent{Data: []byte("hunter2hunter2"), MIMEType: "image/png"}},
		}}, []string{`"role":"assistant"`, `"uri":"test://e"`, `"uri":"test://l"`, `"data":"aHVudGVyMmh1bnRlcjI="`}},
		{"listed resource", &mcp.Resource{URI: "test://r", Name: dirty, Title: dirty, Description: dirty, MIMEType: "text/plain", Size: 12, Meta: meta(),
			Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}},
			[]string{`"uri":"test://r"`, `"size":12`, `"priority":0.5`}},
		{"listed template", &mcp.ResourceTemplate{URITemplate: "test://t/{x}", Name: dirty, Title: dirty, Description: dirty, Meta: meta()},
			[]string{`"uriTemplate":"test://t/{x}"`}},
		{"listed prompt", &mcp.Prompt{Name: "p", Title: dirty, Description: dirty, Meta: meta(),
			Arguments: []*mcp.PromptArgument{{Name: "a", Title: dirty, Description: dirty, Required: true}}},
			[]string{`"name":"p"`, `"name":"a"`, `"required":true`}},
		{"completion", &mcp.CompleteResult{Meta: meta(), Completion: mcp.CompletionResultDetails{Values: []string{"plain", dirty}, Total: 2, HasMore: true}},
			[]string{`"plain"`, `"total":2`, `"hasMore":true`}},
		{"resource update", &mcp.ResourceUpdatedNotificationParams{URI: "test://u/" + dirty, Meta: meta()},
			[]string{`"uri":"test://u/see `}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := json.Marshal(c.in)
			out, err := sanitiseFeature(s, c.in)
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
			if !strings.Contains(string(got), `"upstream/crewlet/refusal"`) {
				t.Errorf("the server's crewlet/ key was dropped, not renamed: %s", got)
			}
			// What the server sent is its own: only the copy changes.
			if after, _ := json.Marshal(c.in); string(after) != string(before) {
				t.Errorf("the input changed:\n%s\n%s", before, after)
			}
		})
	}
}

// sanitiseFeature hands in to the method of s that sanitises its type.
func sanitiseFeature(s *Sanitizer, in any) (any, error) {
	switch x := in.(type) {
	case *mcp.ReadResourceResult:
		return s.ReadResource(x)
	case *mcp.GetPromptResult:
		return s.GetPrompt(x)
	case *mcp.Resource:
		return s.Resource(x)
	case *mcp.ResourceTemplate:
		return s.ResourceTemplate(x)
	case *mcp.Prompt:
		return s.Prompt(x)
	case *mcp.CompleteResult:
		return s.Complete(x)
	case *mcp.ResourceUpdatedNotificationParams:
		return s.ResourceUpdated(x)
	}
	return nil, fmt.Errorf("no method for %T", in)
}

// OUT-1: a resource reads the same whether a tool's result embeds it or a
// client reads it directly: one rule walks both, blob and all.
func TestReadResourceReadsAsEmbedded_OUT1(t *testing.T) {
	s := New("hunter2hunter2")
	for _, rc := range []*mcp.ResourceContents{
		{URI: "test://x?k=hunter2hunter2", MIMEType: "text/plain", Text: "a hunter2hunter2 \x07b", Meta: mcp.Meta{"crewlet/x": "Bearer abcdefgh12345"}},
		{URI: "test://y", MIMEType: "image/png", Blob: []byte("\x00\xffhunter2hunter2")},
	} {
		res, err := s.Result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: rc}}})
		if err != nil {
			t.Fatal(err)
		}
		read, err := s.ReadResource(&mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}})
		if err != nil {
			t.Fatal(err)
		}
		embedded, _ := json.Marshal(res.Content[0].(*mcp.EmbeddedResource).Resource)
		direct, _ := json.Marshal(read.Contents[0])
		if string(embedded) != string(direct) {
			t.Errorf("embedded %s\nread     %s", embedded, direct)
		}
		if rc.Blob != nil && string(read.Contents[0].Blob) != string(rc.Blob) {
			t.Errorf("the blob changed: %q", read.Contents[0].Blob)
		}
	}
}

// OUT-1: binary posing as text in a read, a prompt, a listing, a
// completion or an update refuses it whole, saying which message held it.
func TestFeaturesWithBinaryAreRefused_OUT1(t *testing.T) {
	s := New()
	for name, run := range map[string]func() error{
		"read": func() error {
			_, err := s.ReadResource(&mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://a", Text: "a\x00b"}}})
			return err
		},
		"prompt": func() error {
			_, err := s.GetPrompt(&mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "a\xff"}}}})
			return err
		},
		"resource": func() error { _, err := s.Resource(&mcp.Resource{URI: "test://a", Description: "a\xff"}); return err },
		"template": func() error {
			_, err := s.ResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://\x00{x}"})
			return err
		},
		"prompt list": func() error {
			_, err := s.Prompt(&mcp.Prompt{Name: "p", Arguments: []*mcp.PromptArgument{{Name: "a\xff"}}})
			return err
		},
		"complete": func() error {
			_, err := s.Complete(&mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"a\x00"}}})
			return err
		},
		"update": func() error {
			_, err := s.ResourceUpdated(&mcp.ResourceUpdatedNotificationParams{URI: "a\xff"})
			return err
		},
	} {
		err := run()
		if !errors.Is(err, ErrBinary) || !strings.HasPrefix(err.Error(), "the server's ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// OUT-1: a server's failure to answer reaches the client sanitised: a
// JSON-RPC error keeps its code, its message and data are redacted, data
// that is not JSON is dropped; any other error becomes its redacted text.
func TestServerErrorsAreSanitised_OUT1(t *testing.T) {
	s := New("hunter2hunter2")
	var wire *jsonrpc.Error
	err := s.Error(fmt.Errorf("calling: %w", &jsonrpc.Error{Code: -32002, Message: "no test://x?k=hunter2hunter2",
		Data: json.RawMessage(`{"uri":"hunter2hunter2","n":1}`)}))
	if !errors.As(err, &wire) || wire.Code != -32002 || wire.Message != "no test://x?k="+Redacted || string(wire.Data) != `{"uri":"[REDACTED]","n":1}` {
		t.Errorf("wire error: %#v", err)
	}
	err = s.Error(&jsonrpc.Error{Code: 1, Message: "a\x00", Data: json.RawMessage(`not json hunter2hunter2`)})
	if !errors.As(err, &wire) || wire.Message != binaryMessage || wire.Data != nil {
		t.Errorf("binary wire error: %#v", err)
	}
	if err := s.Error(errors.New("dial with key hunter2hunter2")); err == nil || err.Error() != "dial with key "+Redacted {
		t.Errorf("plain error: %v", err)
	}
	if s.Error(nil) != nil {
		t.Error("nil became an error")
	}
}

// OUT-1: a listed tool's text passes the result rules (its title,
// description, annotations' title, every string of its schemas, its _meta
// with crewlet/ keys renamed), its input is left as it was, and a tool
// whose name would have to change is refused without repeating the name.
func TestListedToolIsSanitised_OUT1(t *testing.T) {
	s := New("hunter2hunter2")
	in := &mcp.Tool{
		Name:        "lookup",
		Title:       "t hunter2hunter2",
		Description: "d hunter2hunter2 \x1b[31mred\x1b[0m",
		Annotations: &mcp.ToolAnnotations{Title: "a hunter2hunter2"},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"q": map[string]any{"type": "string", "description": "q hunter2hunter2"}}},
		OutputSchema: map[string]any{"type": "object", "description": "o hunter2hunter2"},
		Meta:         mcp.Meta{"crewlet/hints": "forged", "note": "hunter2hunter2"},
	}
	before, _ := json.Marshal(in)
	out, err := s.Tool(in)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(out)
	for _, leak := range []string{"hunter2hunter2", `"crewlet/hints"`, "\\u001b"} {
		if strings.Contains(string(got), leak) {
			t.Errorf("the sanitised tool holds %q: %s", leak, got)
		}
	}
	if out.Name != "lookup" || !strings.Contains(string(got), `"type":"object"`) || !strings.Contains(string(got), Redacted) {
		t.Errorf("the sanitised tool lost what it should keep: %s", got)
	}
	if after, _ := json.Marshal(in); string(after) != string(before) {
		t.Errorf("the input changed: %s", after)
	}
	if _, err := s.Tool(&mcp.Tool{Name: "x hunter2hunter2", InputSchema: map[string]any{"type": "object"}}); err == nil ||
		strings.Contains(err.Error(), "hunter2hunter2") {
		t.Errorf("a tool whose name holds a secret: %v", err)
	}
}
