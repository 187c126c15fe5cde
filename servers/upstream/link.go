package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The link to a server carries the hub's tools/call requests over the
// SDK's own connections (mcp.Connection), so the protocol on the wire is
// the SDK's: its POSTs and headers, its event-stream reader, its bound on
// one message, its resumption of a broken stream, its stdio framing. What
// the hub adds is only what the SDK's session cannot give it: the answer
// as the server wrote it (a jsonrpc.Response's result is the raw JSON),
// for the hub to sanitise in one pass, and the call each message of the
// server belongs to. How a call reaches its connection depends on the
// transport:
//   - a stdio child or a legacy SSE server has one connection, which the
//     SDK's session reads; a call is written on it beside the SDK's own
//     requests, and the tap (tapConn) hands the call its response before
//     the SDK's session sees it (sharedLink);
//   - a streamable HTTP server is sent each call on a connection of its
//     own that the SDK's client transport opens, whose POST and event
//     stream carry that call alone: what the server sends there (its
//     log lines, its requests of the client) is that call's (streamLink).
//     The SDK's session cannot be handed the call's answer on its own
//     connection, which the hub cannot wrap (the SDK drives it through
//     unexported methods), nor tell which stream a message came on.

// link carries a server's tools/call requests.
type link interface {
	// call writes req and returns the result of its response as the
	// server wrote it, or the *jsonrpc.Error it carried. A link that
	// broke under the call answers errLinkBroken; a call whose own
	// connection broke, the session's still up, errAnswerCut. f is the
	// call's flight;
	// hdr the parameter headers a streamable HTTP request carries
	// (x-mcp-header). When ctx ends first, the server is told the call
	// is cancelled, off the caller's way, and call answers ctx's error.
	call(ctx context.Context, f *flight, req *jsonrpc.Request, hdr http.Header) (json.RawMessage, error)
}

// errLinkBroken is a call whose connection failed after the request was
// sent, before its answer came.
var errLinkBroken = errors.New("the connection to the server broke during the call")

// errAnswerCut is a call to a streamable HTTP server whose own connection
// broke before its answer was whole (the answer's body or event stream
// ended mid-way, with nothing to resume it from). That connection carried
// this call alone: the session, which other calls and the SDK's own
// requests use, is not known to have ended, so nothing waits for its end.
var errAnswerCut = errors.New("the call's own connection broke before its answer was whole")

// errSessionGone is a server that no longer knows the session: it is over.
var errSessionGone = errors.New("the server no longer knows the session")

// callPrefix begins the id of every call the hub writes; the SDK's own
// requests have integer ids, so the two never collide.
const callPrefix = "crewlet-call-"

// answerOf reads a call's response: its result, or the server's error.
// An error that is not the server's is the SDK's client saying the stream
// ended without an answer.
func answerOf(r *jsonrpc.Response) (json.RawMessage, error) {
	if r.Error == nil {
		return r.Result, nil
	}
	var rpcErr *jsonrpc.Error
	if errors.As(r.Error, &rpcErr) {
		return nil, rpcErr
	}
	return nil, errLinkBroken
}

// cancelled is the notification that tells the server a call is
// cancelled, as the SDK's client tells it. meta is the _meta of a
// 2026-07-28 request, from which the SDK's HTTP transport sets the
// standard headers such a message needs; nil on a session revision.
func cancelled(id jsonrpc.ID, reason string, meta []byte) *jsonrpc.Request {
	p := map[string]any{"requestId": id.Raw(), "reason": reason}
	if len(meta) > 0 {
		p["_meta"] = json.RawMessage("{" + string(meta) + "}")
	}
	b, _ := json.Marshal(p)
	return &jsonrpc.Request{Method: "notifications/cancelled", Params: b}
}

// sharedLink carries calls on the connection the SDK's session reads: a
// stdio child's pipes or a legacy SSE server's stream. A call is written
// on the connection as the SDK's requests are; the tap hands its response
// to the call waiting for it (deliver) and never to the SDK's session,
// which made no such request. Everything else the server sends reaches the
// SDK's session, which hands it to the calls in flight as it always has.
type sharedLink struct {
	i    *Instance
	meta []byte         // the _meta a 2026-07-28 request carries
	conn mcp.Connection // the SDK's connection beneath the tap, set once it is made
	// nudge is set for a stdio child: a call whose answer is late gets
	// the child pinged (nudgeFirst).
	nudge bool

	mu      sync.Mutex
	waiting map[string]chan answer // by request id
	broken  bool
}

type answer struct {
	result json.RawMessage
	err    error
}

func newSharedLink(i *Instance, nudge bool) *sharedLink {
	return &sharedLink{i: i, nudge: nudge, waiting: map[string]chan answer{}}
}

// A call whose answer is late gets a stdio child pinged, on a doubling
// schedule. A server built with Go 1.26 or later can stop for good with a
// request read and its answer unwritten, its only busy thread parked in a
// blocking read of stdin, until more input arrives: with go-sdk's stdio
// server about once in 6,000 to 500,000 calls made one at a time here,
// never with the same server built with Go 1.25. Any line wakes it; a ping
// is one every MCP server must answer, and its answer, its id the hub's,
// is taken by deliver like a call's, so the SDK's session never sees it.
const (
	nudgeFirst = 500 * time.Millisecond
	nudgeMax   = 15 * time.Second
)

// nudges numbers the pings; their ids share the calls' prefix.
var nudges atomic.Int64

func (l *sharedLink) call(ctx context.Context, _ *flight, req *jsonrpc.Request, _ http.Header) (json.RawMessage, error) {
	id, _ := req.ID.Raw().(string)
	ch := make(chan answer, 1)
	l.mu.Lock()
	if l.broken {
		l.mu.Unlock()
		return nil, errLinkBroken
	}
	l.waiting[id] = ch
	l.mu.Unlock()
	defer l.forget(id)
	if err := l.conn.Write(ctx, req); err != nil {
		var urlErr *url.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &urlErr):
			// A legacy SSE server's message endpoint could not be
			// reached: said as the transport's failure.
			return nil, err
		}
		return nil, errLinkBroken
	}
	if !l.nudge {
		select {
		case a, ok := <-ch:
			return l.answered(a, ok)
		case <-ctx.Done():
			return l.cancel(ctx, req)
		}
	}
	next := nudgeFirst
	late := time.NewTimer(next)
	defer late.Stop()
	for {
		select {
		case a, ok := <-ch:
			return l.answered(a, ok)
		case <-ctx.Done():
			return l.cancel(ctx, req)
		case <-late.C:
			id, _ := jsonrpc.MakeID(callPrefix + "nudge-" + strconv.FormatInt(nudges.Add(1), 10))
			_ = l.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "ping"})
			next = min(2*next, nudgeMax)
			late.Reset(next)
		}
	}
}

func (l *sharedLink) answered(a answer, ok bool) (json.RawMessage, error) {
	if !ok {
		return nil, errLinkBroken
	}
	return a.result, a.err
}

// cancel tells the server a call whose caller gave up is cancelled, off
// the caller's way, and answers the caller's error.
func (l *sharedLink) cancel(ctx context.Context, req *jsonrpc.Request) (json.RawMessage, error) {
	reason := ctx.Err().Error()
	l.i.wg.Go(func() {
		cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer stop()
		_ = l.conn.Write(cctx, cancelled(req.ID, reason, l.meta))
	})
	return nil, ctx.Err()
}

func (l *sharedLink) forget(id string) {
	l.mu.Lock()
	delete(l.waiting, id)
	l.mu.Unlock()
}

// deliver hands a response to the call it answers; false for a response
// to one of the SDK's own requests. A response to a call no longer waiting
// (it was cancelled) is taken all the same: the SDK's session made no such
// request.
func (l *sharedLink) deliver(r *jsonrpc.Response) bool {
	id, ok := r.ID.Raw().(string)
	if !ok || !strings.HasPrefix(id, callPrefix) {
		return false
	}
	res, err := answerOf(r)
	l.give(id, answer{res, err})
	return true
}

// refuse hands a call an answer the SDK could not read as the server's
// unreadable answer; false if no call is waiting for it.
func (l *sharedLink) refuse(id string, err error) bool {
	return l.give(id, answer{err: err})
}

func (l *sharedLink) give(id string, a answer) bool {
	l.mu.Lock()
	ch := l.waiting[id]
	delete(l.waiting, id)
	l.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- a
	return true
}

// fail ends every call waiting: the connection stopped reading.
func (l *sharedLink) fail() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.broken = true
	for id, ch := range l.waiting {
		close(ch)
		delete(l.waiting, id)
	}
}

// streamLink carries calls to a streamable HTTP server, each on its own
// connection from the SDK's client transport: the SDK sends the POST (with
// the standard headers of 2026-07-28 taken from the message), reads the
// JSON or event-stream answer within its bound on one event, and resumes a
// broken stream after its last event id as it does for its own calls. The
// session the connection belongs to, which the SDK lets only the
// connection that opened it carry, is put on its requests by the adapter
// beneath it (sessionRT), with the parameter headers of a tool that has
// them.
type streamLink struct {
	i         *Instance
	life      context.Context                // the instance's supervision: ends when it closes
	transport *mcp.StreamableClientTransport // its client runs through sessionRT
	session   string                         // "" from 2026-07-28 on, which has no sessions
	version   string
	meta      []byte
}

func (l *streamLink) call(ctx context.Context, f *flight, req *jsonrpc.Request, hdr http.Header) (json.RawMessage, error) {
	id, _ := json.Marshal(req.ID.Raw())
	w := &wire{session: l.session, version: l.version, id: id}
	plain := withWire(ctx, &wireWrite{wire: w})
	conn, err := l.transport.Connect(plain)
	if err != nil {
		return nil, err
	}
	closeConn := true
	defer func() {
		if closeConn {
			conn.Close()
		}
	}()
	// The call's own write carries its parameter headers; the stream it
	// opens, and its resumption, live as long as ctx.
	// As the SDK's client, a call whose context ends has the server told,
	// off the caller's way, on the call's own connection, closed after.
	cut := func() error {
		closeConn = false
		reason := ctx.Err().Error()
		l.i.wg.Go(func() {
			defer conn.Close()
			cctx, stop := context.WithTimeout(context.WithoutCancel(plain), 5*time.Second)
			defer stop()
			_ = conn.Write(cctx, cancelled(req.ID, reason, l.meta))
		})
		return ctx.Err()
	}
	answered := false
	defer func() { w.answer(answered) }()
	if err := conn.Write(withWire(w.drainFor(ctx, l.life), &wireWrite{wire: w, params: hdr}), req); err != nil {
		if ctx.Err() != nil {
			return nil, cut()
		}
		return nil, l.failure(w, err, true)
	}
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, cut()
			}
			return nil, l.failure(w, err, false)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID != req.ID {
				continue
			}
			if _, _, why := w.seen(); why != "" {
				// The adapter's stand-in for an answer the SDK could not
				// read.
				return nil, &UnreadableError{Why: why}
			}
			answered = true
			res, err := answerOf(m)
			if errors.Is(err, errLinkBroken) {
				// The SDK's stand-in for an answer its stream ended
				// before, with no event id to resume from.
				err = errAnswerCut
			}
			return res, err
		case *jsonrpc.Request:
			if !m.IsCall() {
				l.i.notifyFor(f, m.Method, m.Params)
				continue
			}
			// A request on the call's own stream is that call's: it goes
			// to the call's client, whatever else is in flight (issue 25
			// defect 4).
			l.answer(ctx, plain, conn, f, m)
		}
	}
}

// answer answers a server's request that came on a call's stream, through
// the call's client, on the call's connection.
func (l *streamLink) answer(ctx, plain context.Context, conn mcp.Connection, f *flight, req *jsonrpc.Request) {
	result, err := l.i.serverRequest(ctx, f, req.Method, req.Params)
	resp := &jsonrpc.Response{ID: req.ID}
	if err == nil {
		resp.Result, err = json.Marshal(result)
	}
	if err != nil {
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) {
			rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		resp.Result, resp.Error = nil, rpcErr
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(plain), 30*time.Second)
	defer cancel()
	if err := conn.Write(rctx, resp); err != nil {
		l.i.log.Warn("server_request_unanswered", "method", req.Method, "error", err.Error())
	}
}

// failure says what broke a call's connection, from what the SDK's client
// said and what the adapter saw of the server's answers. written is set
// for a failure of the request's own write (its POST).
func (l *streamLink) failure(w *wire, err error, written bool) error {
	status, tooBig, why := w.seen()
	switch {
	case tooBig:
		return &UnreadableError{Why: tooLarge}
	case why != "":
		return &UnreadableError{Why: why}
	case status == http.StatusNotFound && l.session != "":
		return errSessionGone
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr
	}
	if rpcErr := serverError(err); rpcErr != nil {
		// The server refused the call with a JSON-RPC error of its own.
		return rpcErr
	}
	if written && status != 0 && (status < 200 || status > 299) {
		return fmt.Errorf("the server answered %d %s", status, http.StatusText(status))
	}
	if why, ok := sdkUnreadable(err); ok {
		return &UnreadableError{Why: why}
	}
	if written {
		// In the SDK's words, without the SDK's own marker of a request
		// it did not send (a JSON-RPC error of its, not the server's).
		return errors.New(err.Error())
	}
	return errAnswerCut
}

// serverError finds the server's JSON-RPC error in what the SDK's client
// answered: the SDK wraps its own marker of a failed write (code -32005,
// "rejected by transport") as a JSON-RPC error too, which is not the
// server's.
func serverError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	var walk func(error) bool
	walk = func(err error) bool {
		if e, ok := err.(*jsonrpc.Error); ok && !(e.Code == -32005 && e.Message == "rejected by transport") {
			found = e
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			return u.Unwrap() != nil && walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	walk(err)
	return found
}

// sdkUnreadable tells, from the failure of a call's connection, a server
// whose answer the SDK's client could not read (a message it could not
// decode, an event malformed or past its bound on one event), and says
// what was wrong in the SDK's words. The SDK says it in text alone; the
// tests of issue 25 defects 5 and 8 hold these words to the SDK in use.
func sdkUnreadable(err error) (string, bool) {
	s := err.Error()
	for _, phrase := range []string{"failed to decode", "malformed event"} {
		if i := strings.Index(s, phrase); i >= 0 {
			return s[i:], true
		}
	}
	return "", false
}
