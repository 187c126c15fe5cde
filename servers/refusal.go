package servers

import (
	"github.com/crewlet/hub/authority"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refusalBody is the structured content of a refused call.
type refusalBody struct {
	Class    authority.Class `json:"class"`
	Sentence string          `json:"sentence"`
	Data     map[string]any  `json:"data,omitempty"`
}

// Refused turns a refusal into a failed tool result (REF-1): the sentence as
// text for the model, the class in structured content and in the result's
// metadata for everything that is not a model.
func Refused(r *authority.Refusal) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: r.Sentence}},
		StructuredContent: refusalBody{Class: r.Class, Sentence: r.Sentence, Data: r.Data},
		Meta:              mcp.Meta{MetaRefusal: string(r.Class)},
	}
}

// ClassOf reads the refusal class off a tool result, from the hub's marker
// in its metadata alone: structured content is the tool's to write, and a
// third-party server that copies the refusal shape must not be taken for
// the hub (issue 25 defect 6; the sanitiser renames an upstream's own
// crewlet/ keys). ok is false for a success and for a failure that carries
// no class, which is what a third-party server's own failure looks like
// (REF-6): the hub never guesses a class from prose it did not write.
func ClassOf(res *mcp.CallToolResult) (authority.Class, bool) {
	if res == nil || !res.IsError {
		return "", false
	}
	if s, ok := res.Meta[MetaRefusal].(string); ok {
		if _, known := authority.Lookup(s); known {
			return authority.Class(s), true
		}
	}
	return "", false
}
