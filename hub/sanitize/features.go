package sanitize

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Beside tools, a hub passes on what a third-party server offers of its
// resources and prompts: their lists, a resource read, a prompt got, a
// completion, word that a resource changed. Each reaches the client as
// surely as a tool's result, so each passes the rules a result passes
// (OUT-1): every piece of text has control characters stripped and secrets
// redacted, binary posing as text is refused, and _meta keys that would
// read as the hub's are renamed (ForeignMetaKey). A resource's contents are
// walked by the rule that walks a resource embedded in a tool's result, so
// a resource reads the same whichever way it comes: its text redacted, its
// blob binary by type and passed as it came.
//
// Each method answers a sanitised copy and never changes its input, or an
// error (and nothing) when the input holds binary data; the caller refuses
// it rather than pass on part of it. A name the client addresses an item by
// (a URI, a URI template, a prompt's or argument's name) is sanitised like
// any text: a caller routing by it compares the copy with the original.

// ReadResource sanitises a server's answer to a resource read: each
// contents item as an embedded resource is, and the answer's _meta.
// InputRequests and RequestState pass as Result passes them: protocol
// state, not the server's output.
func (s *Sanitizer) ReadResource(r *mcp.ReadResourceResult) (_ *mcp.ReadResourceResult, err error) {
	defer binaryIn("the server's resource", &err)
	if r == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *r
	if r.Contents != nil {
		out.Contents = make([]*mcp.ResourceContents, len(r.Contents))
		for i, c := range r.Contents {
			where := fmt.Sprintf("resource contents item %d", i)
			if out.Contents[i], err = w.resource(where, "the _meta of "+where, c); err != nil {
				return nil, err
			}
		}
	}
	if out.Meta, err = w.meta("its _meta", r.Meta); err != nil {
		return nil, err
	}
	out.InputRequests = maps.Clone(r.InputRequests)
	return &out, nil
}

// GetPrompt sanitises a server's answer to a prompt request: its
// description, and each message's role and content as a result's content
// is (images and audio binary by type, embedded resources as a read).
func (s *Sanitizer) GetPrompt(r *mcp.GetPromptResult) (_ *mcp.GetPromptResult, err error) {
	defer binaryIn("the server's prompt", &err)
	if r == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *r
	if out.Description, err = w.text("its description", r.Description); err != nil {
		return nil, err
	}
	if r.Messages != nil {
		out.Messages = make([]*mcp.PromptMessage, len(r.Messages))
		for i, m := range r.Messages {
			if m == nil {
				continue
			}
			nm := *m
			// The role is the protocol's word, but the server wrote it,
			// as it writes a log line's level.
			role, err := w.text(fmt.Sprintf("the role of message %d", i), string(m.Role))
			if err != nil {
				return nil, err
			}
			nm.Role = mcp.Role(role)
			if nm.Content, err = w.content(i, m.Content); err != nil {
				return nil, err
			}
			out.Messages[i] = &nm
		}
	}
	if out.Meta, err = w.meta("its _meta", r.Meta); err != nil {
		return nil, err
	}
	out.InputRequests = maps.Clone(r.InputRequests)
	return &out, nil
}

// Resource sanitises a resource as a server lists it: its URI, name,
// title, description, MIME type and _meta. Icons pass as a resource link's
// do in a result.
func (s *Sanitizer) Resource(r *mcp.Resource) (_ *mcp.Resource, err error) {
	defer binaryIn("the server's resource list", &err)
	if r == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *r
	out.Annotations = copyAnnotations(r.Annotations)
	out.Icons = slices.Clone(r.Icons)
	if err := w.texts("its resource", []textField{
		{"the URI", &out.URI}, {"the name", &out.Name}, {"the title", &out.Title},
		{"the description", &out.Description}, {"the MIME type", &out.MIMEType},
	}); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("the _meta of its resource", r.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResourceTemplate sanitises a resource template as a server lists it, as
// Resource does a resource.
func (s *Sanitizer) ResourceTemplate(t *mcp.ResourceTemplate) (_ *mcp.ResourceTemplate, err error) {
	defer binaryIn("the server's resource template list", &err)
	if t == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *t
	out.Annotations = copyAnnotations(t.Annotations)
	out.Icons = slices.Clone(t.Icons)
	if err := w.texts("its template", []textField{
		{"the URI template", &out.URITemplate}, {"the name", &out.Name}, {"the title", &out.Title},
		{"the description", &out.Description}, {"the MIME type", &out.MIMEType},
	}); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("the _meta of its template", t.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// Prompt sanitises a prompt as a server lists it: its name, title,
// description and _meta, and each argument's name, title and description.
func (s *Sanitizer) Prompt(p *mcp.Prompt) (_ *mcp.Prompt, err error) {
	defer binaryIn("the server's prompt list", &err)
	if p == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *p
	out.Icons = slices.Clone(p.Icons)
	if err := w.texts("its prompt", []textField{
		{"the name", &out.Name}, {"the title", &out.Title}, {"the description", &out.Description},
	}); err != nil {
		return nil, err
	}
	if p.Arguments != nil {
		out.Arguments = make([]*mcp.PromptArgument, len(p.Arguments))
		for i, a := range p.Arguments {
			if a == nil {
				continue
			}
			na := *a
			if err := w.texts(fmt.Sprintf("argument %d of its prompt", i), []textField{
				{"the name", &na.Name}, {"the title", &na.Title}, {"the description", &na.Description},
			}); err != nil {
				return nil, err
			}
			out.Arguments[i] = &na
		}
	}
	if out.Meta, err = w.meta("the _meta of its prompt", p.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// Complete sanitises a server's completion: every value it offers and its
// _meta.
func (s *Sanitizer) Complete(r *mcp.CompleteResult) (_ *mcp.CompleteResult, err error) {
	defer binaryIn("the server's completion", &err)
	if r == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *r
	if r.Completion.Values != nil {
		out.Completion.Values = make([]string, len(r.Completion.Values))
		for i, v := range r.Completion.Values {
			if out.Completion.Values[i], err = w.text(fmt.Sprintf("value %d", i), v); err != nil {
				return nil, err
			}
		}
	}
	if out.Meta, err = w.meta("its _meta", r.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResourceUpdated sanitises a server's word that a resource changed: the
// URI it names and its _meta.
func (s *Sanitizer) ResourceUpdated(p *mcp.ResourceUpdatedNotificationParams) (_ *mcp.ResourceUpdatedNotificationParams, err error) {
	defer binaryIn("the server's resource update", &err)
	if p == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *p
	if out.URI, err = w.text("its URI", p.URI); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("its _meta", p.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// binaryMessage stands in for an error message that held binary data: the
// message cannot be passed on, and that there was one can.
const binaryMessage = "the server's error message held binary data"

// Error is what a client is told of a third-party server's failure to
// answer a request for one of its resources, prompts or completions. A
// JSON-RPC error keeps its code, so a client can still tell a resource not
// found from a fault; its message is sanitised as text and its data as
// structured content, which is dropped if it holds binary or is not JSON.
// Any other error becomes its sanitised text. Nil stays nil.
func (s *Sanitizer) Error(err error) error {
	if err == nil {
		return nil
	}
	w := s.foreignWalker()
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) {
		msg, terr := w.text("", err.Error())
		if terr != nil {
			msg = binaryMessage
		}
		return errors.New(msg)
	}
	out := *wire
	if out.Message, err = w.text("", wire.Message); err != nil {
		out.Message = binaryMessage
	}
	if wire.Data != nil {
		data, err := w.structured("its data", wire.Data)
		raw, _ := data.(json.RawMessage)
		if err != nil || raw == nil {
			out.Data = nil
		} else {
			out.Data = raw
		}
	}
	return &out
}

// Tool sanitises a tool as a server lists it (OUT-1): what a model or a
// person reads of it (its title, description and its annotations' title),
// every string of its input and output schemas, and its _meta, whose
// crewlet/ keys are renamed as a result's are. Its name is the address the
// server knows it by: a tool whose name would have to change is refused,
// and the refusal does not repeat the name.
func (s *Sanitizer) Tool(t *mcp.Tool) (_ *mcp.Tool, err error) {
	defer binaryIn("the server's tool list", &err)
	if t == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *t
	out.Icons = slices.Clone(t.Icons)
	if err := w.texts("its tool", []textField{
		{"the name", &out.Name}, {"the title", &out.Title}, {"the description", &out.Description},
	}); err != nil {
		return nil, err
	}
	if out.Name != t.Name {
		return nil, errors.New("one of its tools has a name that holds a secret or a control character; the hub cannot offer it under another name")
	}
	if t.Annotations != nil {
		a := *t.Annotations
		if err := w.texts("its tool's annotations", []textField{{"the title", &a.Title}}); err != nil {
			return nil, err
		}
		out.Annotations = &a
	}
	if t.InputSchema != nil {
		if out.InputSchema, err = w.structured("the input schema of its tool", t.InputSchema); err != nil {
			return nil, err
		}
	}
	if t.OutputSchema != nil {
		if out.OutputSchema, err = w.structured("the output schema of its tool", t.OutputSchema); err != nil {
			return nil, err
		}
	}
	if out.Meta, err = w.meta("the _meta of its tool", t.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}
