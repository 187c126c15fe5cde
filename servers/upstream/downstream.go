//lint:file-ignore SA1019 a hub forwards logging and sampling (deprecated in 2026-07-28, SEP-2577) for clients and servers of the session revisions, which still use them.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Downstream is the client a call was made for. What an upstream server
// sends while serving that call (log lines, progress, sampling and
// elicitation requests) is handed to it, so a client of the hub sees what it
// would see talking to the server directly.
type Downstream interface {
	Log(ctx context.Context, p *mcp.LoggingMessageParams) error
	Progress(ctx context.Context, p *mcp.ProgressNotificationParams) error
	CreateMessage(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	ListRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
	// ProgressToken is the client's own token for the call, nil if it asked
	// for no progress.
	ProgressToken() any
	// Caller names who the call is for (the credential that made it): a
	// message that names no call is handed to the one call in flight only
	// while every call the server has carried was this caller's.
	Caller() string
}

type downstreamKey struct{}

// WithDownstream marks ctx as a call made for d.
func WithDownstream(ctx context.Context, d Downstream) context.Context {
	return context.WithValue(ctx, downstreamKey{}, d)
}

func downstreamFrom(ctx context.Context) Downstream {
	d, _ := ctx.Value(downstreamKey{}).(Downstream)
	return d
}

// flight is one call in flight to the server, made for a downstream client.
type flight struct {
	d     Downstream
	token string // the token the hub gave the server, "" without progress
	// call is the call's context: a request of the server handed to the
	// call's client ends with it (issue 25 defect 4).
	call context.Context
}

// flights tracks the calls in flight. What a server sends while calls run
// reaches only the call it belongs to (issue 36): a message that came on a
// call's own response stream (streamable HTTP) is that call's; otherwise
// the progress token the hub gave the call, in the message's _meta (or a
// progress notification's own token), names it.
//
// A message that names no call (over stdio, most log lines and requests
// of a server that knows nothing of progress tokens) is the one call in
// flight's only while the server has served a single caller: a log line
// written late for one caller's call would otherwise be shown to the next
// caller (a shared server's notes, its sampling prompts and its
// elicitations). Once a second caller, or a call made for no client (an
// agent's turn), has called the server, such a message reaches no client,
// however many calls are in flight, even one: a log line or progress
// notification goes to the hub's log (server_note_unrouted), a request is
// refused. Guessing within one caller's calls shows that caller nothing
// that was not theirs; guessing across callers is the leak.
type flights struct {
	mu   sync.Mutex
	next int
	list []*flight
	// caller is the caller of every call so far, with called set after
	// the first; mixed once a call came for another.
	caller        string
	called, mixed bool
}

// noClient is the caller key of a call made for no client.
const noClient = "\x00no client"

// add registers a call, ctx its context; d is nil for a call made for no
// client (an agent's turn), which still counts, so its server's requests
// are never handed to another call's client.
func (fs *flights) add(ctx context.Context, d Downstream) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := &flight{d: d, call: ctx}
	if d != nil && d.ProgressToken() != nil {
		fs.next++
		f.token = fmt.Sprintf("crewlet-%d", fs.next)
	}
	who := noClient
	if d != nil {
		who = d.Caller()
	}
	switch {
	case !fs.called:
		fs.caller, fs.called = who, true
	case who != fs.caller:
		fs.mixed = true
	}
	fs.list = append(fs.list, f)
	return f
}

// sole is the one call in flight while the server has only ever served
// one caller, nil otherwise.
func (fs *flights) sole() *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.mixed || len(fs.list) != 1 {
		return nil
	}
	return fs.list[0]
}

func (fs *flights) remove(f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, x := range fs.list {
		if x == f {
			fs.list = append(fs.list[:i:i], fs.list[i+1:]...)
			return
		}
	}
}

// byToken is the call the hub gave the progress token tok, nil for none.
func (fs *flights) byToken(tok any) *flight {
	s, ok := tok.(string)
	if !ok || s == "" {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.list {
		if f.token == s {
			return f
		}
	}
	return nil
}

// errCallEnded answers a server's request whose call ended first.
var errCallEnded = errors.New("the call this request was made for has ended (its client went away, it was cancelled, or it ran out of time), so nobody is left to answer")

// ask hands a server's request to the client of flight f and waits for the
// answer while both the request (ctx) and f's call last. The wait ends
// with the call even if the client never answers and ignores its context
// (a client that hung up): a flight must never outlive its call, or every
// later request of the server would find "several calls in flight" (issue
// 25 defect 4).
func ask[R any](ctx context.Context, f *flight, do func(context.Context) (R, error)) (R, error) {
	var zero R
	if f.call != nil {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(f.call, stop)()
	}
	type answer struct {
		res R
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		res, err := do(ctx)
		ch <- answer{res, err}
	}()
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		if f.call != nil && f.call.Err() != nil {
			return zero, errCallEnded
		}
		return zero, ctx.Err()
	}
}

var (
	errNoClient = errors.New("no client of the hub is waiting on the call this request belongs to, so there is nobody to ask")
	errUnrouted = errors.New("the request names no call of the hub's (it came on no call's own stream and carries no progress token the hub gave a call), and the server has served more than one caller or has several calls in flight, so the hub asks no client: it will not guess whose call it belongs to")
)

// clientOptions wires an upstream session's notifications and requests to
// the flights of this instance.
func (i *Instance) clientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return i.sample(ctx, req.Params)
		},
		// Set so the SDK declares elicitation to the server; requests are
		// answered by passElicitation before they reach it.
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return i.elicit(ctx, req.Params)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if i.opts.OnResourceUpdated != nil {
				i.opts.OnResourceUpdated(ctx, req.Params)
			}
		},
	}
}

// sample hands a server's sampling request that came on no call's own
// stream to the client of the call its _meta names.
func (i *Instance) sample(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return i.sampleFor(ctx, nil, p)
}

// sampleFor hands a sampling request to the client of flight f, or, with
// f nil, of the call its _meta names.
func (i *Instance) sampleFor(ctx context.Context, f *flight, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	f, err := i.flightFor(f, p.Meta)
	if err != nil {
		i.log.Warn("server_request_undelivered", "method", "sampling/createMessage", "error", err.Error())
		return nil, err
	}
	res, err := ask(ctx, f, func(ctx context.Context) (*mcp.CreateMessageResult, error) { return f.d.CreateMessage(ctx, p) })
	if err != nil {
		i.log.Warn("server_request_failed", "method", "sampling/createMessage", "error", err.Error())
	}
	return res, err
}

// elicit hands a server's elicitation request that came on no call's own
// stream to the client of the call its _meta names, as the server wrote it.
func (i *Instance) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return i.elicitFor(ctx, nil, p)
}

func (i *Instance) elicitFor(ctx context.Context, f *flight, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	f, err := i.flightFor(f, p.Meta)
	if err != nil {
		i.log.Warn("server_request_undelivered", "method", "elicitation/create", "error", err.Error())
		return nil, err
	}
	res, err := ask(ctx, f, func(ctx context.Context) (*mcp.ElicitResult, error) { return f.d.Elicit(ctx, p) })
	if err != nil {
		i.log.Warn("server_request_failed", "method", "elicitation/create", "error", err.Error())
	}
	return res, err
}

// roots answers a server's roots/list with the roots of the client of the
// call it belongs to; for a request that belongs to no client's call the
// hub answers the roots it has of its own, none: no client's roots are
// shown for another's call.
func (i *Instance) roots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return i.rootsFor(ctx, nil, p)
}

func (i *Instance) rootsFor(ctx context.Context, f *flight, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	var meta mcp.Meta
	if p != nil {
		meta = p.Meta
	}
	f, err := i.flightFor(f, meta)
	if errors.Is(err, errNoClient) || errors.Is(err, errUnrouted) {
		return &mcp.ListRootsResult{Roots: []*mcp.Root{}}, nil
	}
	if err != nil {
		i.log.Warn("server_request_undelivered", "method", "roots/list", "error", err.Error())
		return nil, err
	}
	return ask(ctx, f, func(ctx context.Context) (*mcp.ListRootsResult, error) { return f.d.ListRoots(ctx, p) })
}

// flightFor is the call a server's message belongs to: f where the message
// came on that call's own response stream or in its result, otherwise the
// call whose progress token the message's _meta carries (meta), otherwise
// the one call in flight of a server that has served one caller alone, or
// none (errUnrouted): never a guess across callers.
func (i *Instance) flightFor(f *flight, meta map[string]any) (*flight, error) {
	if f == nil {
		if f = i.flights.byToken(meta["progressToken"]); f == nil {
			if f = i.flights.sole(); f == nil {
				return nil, errUnrouted
			}
		}
	}
	if f.d == nil {
		return nil, errNoClient
	}
	return f, nil
}

// onNotify forwards a server's log lines and progress to the client of the
// call they belong to. It runs as the notification is read off the wire,
// in order: the SDK hands notifications to its handlers on a queue that a
// call's response overtakes, and a client must see a call's log lines and
// progress before its result.
func (i *Instance) onNotify(method string, params json.RawMessage) {
	i.notifyFor(nil, method, params)
}

// notifyFor is onNotify for a notification that came on flight f's own
// response stream (nil: on none), whose log lines are that call's.
func (i *Instance) notifyFor(on *flight, method string, params json.RawMessage) {
	if !utf8.Valid(params) {
		// Bytes that are not UTF-8 would be read with U+FFFD in their
		// place, and the sanitiser could no longer see them for the
		// binary data they are: the line is dropped, as the sanitiser
		// drops one holding binary text (OUT-1).
		i.log.Debug("server_notification_unreadable", "method", method)
		return
	}
	ctx := context.Background()
	switch method {
	case "notifications/message":
		var p mcp.LoggingMessageParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		f, err := i.flightFor(on, p.Meta)
		if err != nil {
			i.unrouted(method, string(p.Level), err == errNoClient)
			return
		}
		_ = f.d.Log(ctx, &p)
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		f := i.flights.byToken(p.ProgressToken)
		if f == nil || f.d == nil {
			i.unrouted(method, "", f != nil)
			return
		}
		p.ProgressToken = f.d.ProgressToken()
		_ = f.d.Progress(ctx, &p)
	}
}

// unrouted writes to the hub's log that a server's note reached no
// client: its method and level, never its text, which is the server's
// for a call's client alone. agent is set for a note of a call made for
// no client (an agent's turn).
func (i *Instance) unrouted(method, level string, agent bool) {
	reason := "it came on no call's own stream, names no call by a progress token the hub gave, and the server has served more than one caller or has several calls in flight"
	if agent {
		reason = "its call was made for no client"
	}
	i.log.Info("server_note_unrouted", "method", method, "level", level, "reason", reason)
}

// Features are what a server offers beside tools.
type Features struct {
	Resources []*mcp.Resource
	Templates []*mcp.ResourceTemplate
	Prompts   []*mcp.Prompt
}

// session returns the live session or the reason there is none.
func (i *Instance) session() (*mcp.ClientSession, error) {
	i.mu.Lock()
	sess := i.sess
	i.mu.Unlock()
	if sess == nil {
		return nil, i.downError(false)
	}
	return sess, nil
}

// ReadResource reads a resource of the server.
func (i *Instance) ReadResource(ctx context.Context, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	sess, err := i.session()
	if err != nil {
		return nil, err
	}
	return sess.ReadResource(ctx, p)
}

// GetPrompt gets a prompt of the server.
func (i *Instance) GetPrompt(ctx context.Context, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	sess, err := i.session()
	if err != nil {
		return nil, err
	}
	return sess.GetPrompt(ctx, p)
}

// Complete asks the server for completions.
func (i *Instance) Complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	sess, err := i.session()
	if err != nil {
		return nil, err
	}
	return sess.Complete(ctx, p)
}

// Subscribe subscribes the hub to a resource of the server.
func (i *Instance) Subscribe(ctx context.Context, p *mcp.SubscribeParams) error {
	sess, err := i.session()
	if err != nil {
		return err
	}
	return sess.Subscribe(ctx, p)
}

// Unsubscribe ends a subscription.
func (i *Instance) Unsubscribe(ctx context.Context, p *mcp.UnsubscribeParams) error {
	sess, err := i.session()
	if err != nil {
		return err
	}
	return sess.Unsubscribe(ctx, p)
}

// Features is what the server offered at its last start.
func (i *Instance) Features() Features {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.features
}

// listFeatures reads a server's resources, templates and prompts, as far as
// it declares them, and asks it for every log line (each client of the hub
// filters by its own level).
func listFeatures(ctx context.Context, sess *mcp.ClientSession) (Features, error) {
	var f Features
	caps := sess.InitializeResult().Capabilities
	if caps == nil {
		return f, nil
	}
	if caps.Resources != nil {
		for r, err := range sess.Resources(ctx, nil) {
			if err != nil {
				return f, fmt.Errorf("listing its resources: %w", err)
			}
			f.Resources = append(f.Resources, r)
		}
		for t, err := range sess.ResourceTemplates(ctx, nil) {
			if err != nil {
				return f, fmt.Errorf("listing its resource templates: %w", err)
			}
			f.Templates = append(f.Templates, t)
		}
	}
	if caps.Prompts != nil {
		for p, err := range sess.Prompts(ctx, nil) {
			if err != nil {
				return f, fmt.Errorf("listing its prompts: %w", err)
			}
			f.Prompts = append(f.Prompts, p)
		}
	}
	if caps.Logging != nil {
		_ = sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"})
	}
	return f, nil
}

// passElicitation hands an elicitation request to the waiting client as the
// server wrote it. The SDK's client checks a requested schema against its
// own reading of the form rules before any handler runs; a hub is not the
// party to judge the server's form, the client that shows it is.
func (i *Instance) passElicitation(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if rr, ok := req.(*mcp.ListRootsRequest); ok && method == "roots/list" {
			return i.roots(ctx, rr.Params)
		}
		er, ok := req.(*mcp.ElicitRequest)
		if method != "elicitation/create" || !ok {
			return next(ctx, method, req)
		}
		return i.elicit(ctx, er.Params)
	}
}
