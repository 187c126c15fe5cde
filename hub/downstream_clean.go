//lint:file-ignore SA1019 a hub forwards logging and sampling (deprecated in 2026-07-28, SEP-2577) for clients and servers of the session revisions, which still use them.

package hub

import (
	"context"
	"log/slog"

	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cleanDownstream is the one rule for what an upstream server sends a
// client while serving its call: every route that hands a call's client to
// an upstream (the SDK's session, the fast path's stream) wraps it here, so
// log lines, progress and sampling and elicitation requests pass the
// sanitiser that results pass (OUT-1), whichever way the call came. A
// server's log line or progress that mentions a configured secret or an
// operator's token would otherwise reach the client as written, however
// carefully its result was redacted (issue 25 defect 2).
func cleanDownstream(s *sanitize.Sanitizer, log *slog.Logger, d upstream.Downstream) upstream.Downstream {
	return cleanDown{s: s, log: log, d: d}
}

type cleanDown struct {
	s   *sanitize.Sanitizer
	log *slog.Logger
	d   upstream.Downstream
}

// A notification holding binary data is dropped, never repaired or cut
// (OUT-1): it is said in the hub's log, as a refused result is.
func (c cleanDown) dropped(method string, err error) error {
	c.log.Warn("server_message_refused", "method", method, "reason", err.Error())
	return err
}

func (c cleanDown) Log(ctx context.Context, p *mcp.LoggingMessageParams) error {
	clean, err := c.s.LogMessage(p)
	if err != nil {
		return c.dropped("notifications/message", err)
	}
	return c.d.Log(ctx, clean)
}

func (c cleanDown) Progress(ctx context.Context, p *mcp.ProgressNotificationParams) error {
	clean, err := c.s.Progress(p)
	if err != nil {
		return c.dropped("notifications/progress", err)
	}
	// The token is the client's own, put there by the link: it goes back
	// as the client wrote it, not as the sanitiser's decoding rounded it
	// (issue 36, finding 7).
	clean.ProgressToken = p.ProgressToken
	return c.d.Progress(ctx, clean)
}

// CreateMessage and Elicit refuse a request holding binary data: the error
// goes back to the server as its request's answer, as a client's own
// refusal would.
func (c cleanDown) CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	clean, err := c.s.CreateMessage(p)
	if err != nil {
		return nil, c.dropped("sampling/createMessage", err)
	}
	return c.d.CreateMessage(ctx, clean)
}

func (c cleanDown) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	clean, err := c.s.Elicit(p)
	if err != nil {
		return nil, c.dropped("elicitation/create", err)
	}
	return c.d.Elicit(ctx, clean)
}

// ListRoots asks the client for what the client holds; all it carries of
// the server's is its _meta, which reaches the client as surely as a
// sampling request's (FuzzTransparency found a configured secret, an
// operator token and crewlet/ keys passed on there as the server wrote
// them), so it passes the same rules.
func (c cleanDown) ListRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	clean, err := c.s.ListRoots(p)
	if err != nil {
		return nil, c.dropped("roots/list", err)
	}
	return c.d.ListRoots(ctx, clean)
}

func (c cleanDown) ProgressToken() any { return c.d.ProgressToken() }

func (c cleanDown) Caller() string { return c.d.Caller() }
