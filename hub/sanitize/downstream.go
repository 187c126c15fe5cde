//lint:file-ignore SA1019 logging and sampling are deprecated in 2026-07-28 (SEP-2577), but a hub still passes them on for the session revisions.

package sanitize

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a third-party server sends a client while serving a call (log
// lines, progress, sampling and elicitation requests) reaches the client as
// surely as the call's result, so it passes the same rules (OUT-1), by the
// same walk: each piece of text in it has control characters stripped and
// secrets redacted, binary posing as text is refused, and _meta keys that
// would read as the hub's are renamed (ForeignMetaKey). Protocol state the
// client matches on passes as it came: a progress token (the client's own)
// and an elicitation's id.
//
// Each method answers a sanitised copy and never changes p, or an error
// (and nothing) when p holds binary data, which the caller drops or
// refuses rather than pass on part of.

// binaryIn names what held binary data in the error *err, if it is a
// BinaryError: a message, not a tool's result.
func binaryIn(what string, err *error) {
	var berr *BinaryError
	if errors.As(*err, &berr) {
		berr.Of = what
	}
}

// LogMessage sanitises a server's log notification: its data (of any JSON
// shape), its level, its logger's name and its _meta.
func (s *Sanitizer) LogMessage(p *mcp.LoggingMessageParams) (_ *mcp.LoggingMessageParams, err error) {
	defer binaryIn("the server's log message", &err)
	return viaJSON(s, p, logShape, true)
}

// Progress sanitises a server's progress notification: its message and its
// _meta.
func (s *Sanitizer) Progress(p *mcp.ProgressNotificationParams) (_ *mcp.ProgressNotificationParams, err error) {
	defer binaryIn("the server's progress notification", &err)
	return viaJSON(s, p, progressShape, true)
}

// CreateMessage sanitises a server's sampling request: its messages'
// content (as a result's content is; images and audio are binary by type;
// tool uses and results too), the system prompt, stop sequences, model
// hints, metadata and _meta.
func (s *Sanitizer) CreateMessage(p *mcp.CreateMessageParams) (_ *mcp.CreateMessageParams, err error) {
	defer binaryIn("the server's sampling request", &err)
	return viaJSON(s, p, createMessageShape, true)
}

// ListRoots sanitises a server's roots request: its _meta, all it carries
// of the server's (what it asks for is the client's own).
func (s *Sanitizer) ListRoots(p *mcp.ListRootsParams) (_ *mcp.ListRootsParams, err error) {
	defer binaryIn("the server's roots request", &err)
	return viaJSON(s, p, listRootsShape, true)
}

// Elicit sanitises a server's elicitation request: the message shown to
// the person, the URL of a url elicitation, the schema asked for (titles,
// descriptions, defaults) and _meta.
func (s *Sanitizer) Elicit(p *mcp.ElicitParams) (_ *mcp.ElicitParams, err error) {
	defer binaryIn("the server's elicitation request", &err)
	return viaJSON(s, p, elicitShape, true)
}
