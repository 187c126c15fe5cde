package sanitize

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Beside tools, a hub passes on what a third-party server offers of its
// resources and prompts: their lists, a resource read, a prompt got, a
// completion, word that a resource changed. Each reaches the client as
// surely as a tool's result, so each passes the rules a result passes
// (OUT-1), by the same walk (shapes.go): every piece of text has control
// characters stripped and secrets redacted, binary posing as text is
// refused, and _meta keys that would read as the hub's are renamed
// (ForeignMetaKey). A resource's contents have the shape of a resource
// embedded in a tool's result, so a resource reads the same whichever way
// it comes: its text redacted, its blob binary by type and passed as it
// came.
//
// Each method answers a sanitised copy and never changes its input, or an
// error (and nothing) when the input holds binary data; the caller refuses
// it rather than pass on part of it. A name the client addresses an item by
// (a URI, a URI template, a prompt's or argument's name) is sanitised like
// any text: a caller routing by it compares the copy with the original.

// ReadResource sanitises a server's answer to a resource read: each
// contents item as an embedded resource is, and the answer's _meta.
func (s *Sanitizer) ReadResource(r *mcp.ReadResourceResult) (_ *mcp.ReadResourceResult, err error) {
	defer binaryIn("the server's resource", &err)
	return viaJSON(s, r, readResourceShape, true)
}

// GetPrompt sanitises a server's answer to a prompt request: its
// description, and each message's role and content as a result's content
// is (images and audio binary by type, embedded resources as a read).
func (s *Sanitizer) GetPrompt(r *mcp.GetPromptResult) (_ *mcp.GetPromptResult, err error) {
	defer binaryIn("the server's prompt", &err)
	return viaJSON(s, r, getPromptShape, true)
}

// Resource sanitises a resource as a server lists it: what a resource link
// in a result shows of it.
func (s *Sanitizer) Resource(r *mcp.Resource) (_ *mcp.Resource, err error) {
	defer binaryIn("the server's resource list", &err)
	return viaJSON(s, r, listedResourceShape, true)
}

// ResourceTemplate sanitises a resource template as a server lists it, as
// Resource does a resource.
func (s *Sanitizer) ResourceTemplate(t *mcp.ResourceTemplate) (_ *mcp.ResourceTemplate, err error) {
	defer binaryIn("the server's resource template list", &err)
	return viaJSON(s, t, templateShape, true)
}

// Prompt sanitises a prompt as a server lists it: its name, title,
// description and _meta, and each argument's name, title and description.
func (s *Sanitizer) Prompt(p *mcp.Prompt) (_ *mcp.Prompt, err error) {
	defer binaryIn("the server's prompt list", &err)
	return viaJSON(s, p, listedPromptShape, true)
}

// Complete sanitises a server's completion: every value it offers and its
// _meta.
func (s *Sanitizer) Complete(r *mcp.CompleteResult) (_ *mcp.CompleteResult, err error) {
	defer binaryIn("the server's completion", &err)
	return viaJSON(s, r, completeShape, true)
}

// ResourceUpdated sanitises a server's word that a resource changed: the
// URI it names and its _meta.
func (s *Sanitizer) ResourceUpdated(p *mcp.ResourceUpdatedNotificationParams) (_ *mcp.ResourceUpdatedNotificationParams, err error) {
	defer binaryIn("the server's resource update", &err)
	return viaJSON(s, p, resourceUpdatedShape, true)
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
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) {
		msg, terr := s.Text(err.Error())
		if terr != nil {
			msg = binaryMessage
		}
		return errors.New(msg)
	}
	out := *wire
	if out.Message, err = s.Text(wire.Message); err != nil {
		out.Message = binaryMessage
	}
	if wire.Data != nil {
		data, err := s.newWalker(true, false).wholeFree(wire.Data, "its data", false)
		if err != nil {
			data = nil
		}
		out.Data = data
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
	out, err := viaJSON(s, t, listedToolShape, true)
	if err == nil && out != nil && out.Name != t.Name {
		return nil, errors.New("one of its tools has a name that holds a secret or a control character; the hub cannot offer it under another name")
	}
	return out, err
}
