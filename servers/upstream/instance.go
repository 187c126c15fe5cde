package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is how the hub identifies itself to upstream servers.
const Version = "0.1.0"

// Tool is a tool an upstream server listed.
type Tool struct {
	Def *mcp.Tool
	// Annotations are the annotations as the server sent them, raw, so an
	// absent hint can be told from a false one.
	Annotations json.RawMessage
}

// State is where an instance is in its life.
type State string

const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	// StateDown: it died or failed to start, and a retry is scheduled.
	StateDown State = "down"
	// StateFailed: it cannot launch as specified (no command, no url), so
	// nothing is retried until a revision changes the spec.
	StateFailed  State = "failed"
	StateStopped State = "stopped"
)

// Status is a snapshot of an instance for operators.
type Status struct {
	State       State
	Cause       string // what took it down, or why it failed
	Since       time.Time
	NextRestart time.Time // zero when none is scheduled
	Attempt     int
	Tools       int
	StderrTail  string
}

// Options configure an instance. Zero values work except Spec.
type Options struct {
	Spec Resolved
	// Dir is a stdio child's working directory: the engine's own.
	Dir string
	// StartTimeout bounds connecting and listing tools (each); 60s if 0.
	StartTimeout time.Duration
	// ProbeTimeout bounds the server/discover probe before falling back to
	// initialize; 5s if 0.
	ProbeTimeout time.Duration
	// StopGrace is how long each gentle step of a stop waits; 2s if 0.
	StopGrace time.Duration
	Logger    *slog.Logger
	// Schedule is the restart schedule; a fresh default one if nil. It is
	// the instance's own from then on.
	Schedule *Schedule
	// Host is the engine's environment, from which only the allowlist
	// passes to a child; os.Environ() if nil.
	Host []string
	// OnTools is called from the instance's own goroutine with the tool
	// list of the first start, and afterwards only when a start lists
	// different tools (MCP-8).
	OnTools func([]Tool)
	// HTTPClient is the base client for http/sse servers.
	HTTPClient *http.Client
	// Seat is the seat a per-role child acts for; empty for a shared
	// server.
	Seat string
	// Lease reports whether this node still holds the seat's lease. It is
	// asked before every restart the instance makes on its own (MCP-10): a
	// child is the seat's identity, and a node that lost the seat must not
	// bring a second copy of it back. Nil means always (one node).
	Lease func() bool
	// Heartbeat is how long a held-back restart waits before asking the
	// lease again; 15s if 0.
	Heartbeat time.Duration
	// OnFeatures is called like OnTools with the server's resources,
	// templates and prompts.
	OnFeatures func(Features)
	// OnConnected is called from the instance's goroutine after every start
	// that brought the server up, first or restart.
	OnConnected func()
	// OnResourceUpdated is called when the server says a subscribed
	// resource changed.
	OnResourceUpdated func(context.Context, *mcp.ResourceUpdatedNotificationParams)
}

// DownError is a call the instance could not serve because its server is
// not running, or stopped running while the call was in flight.
type DownError struct {
	Server      string
	Cause       string
	NextRestart time.Time
	// InFlight is set when the call had been sent and no answer came back:
	// it may have taken effect.
	InFlight bool
}

func (e *DownError) Error() string {
	return fmt.Sprintf("MCP server %s is not running: %s", e.Server, e.Cause)
}

// Instance is one supervised upstream server: a stdio child (its own process
// group) or a session with a remote URL. It watches the server from start to
// stop and restarts it on the schedule. Its goroutines are owned by it and
// ended by Close, which is safe to call more than once.
type Instance struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	status Status
	sess   *mcp.ClientSession
	ended  chan struct{} // closed when the current session is over
	// recorded is closed once the current session's end is in status, so
	// a call that failed under it can say what took the server down.
	recorded chan struct{}
	tools    []Tool
	child    *child
	started  bool // the server has been up at least once
	// link is the revision the first probe chose ("" for the stateless
	// one), remembered so restarts do not probe again; probed says it is
	// known.
	link     string
	probed   bool
	features Features
	flights  flights

	// transport is the HTTP transport the instance made for itself, whose
	// idle connections it closes when it stops.
	transport *http.Transport
	retry     chan struct{}
	cancel    context.CancelFunc
	done      chan struct{}
	once      sync.Once
}

// Start begins supervising; it returns at once. Ready reports when the first
// start is over, whatever its outcome.
func Start(opts Options) *Instance {
	var ownTransport *http.Transport
	if opts.Schedule == nil {
		opts.Schedule = &Schedule{}
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 5 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Host == nil {
		opts.Host = os.Environ()
	}
	if opts.HTTPClient == nil {
		// The default transport's proxy settings and timeouts, with room
		// for many concurrent calls to one server.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		opts.HTTPClient = &http.Client{Transport: t}
		ownTransport = t
	}
	opts.Schedule.EnsureDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	i := &Instance{
		opts:      opts,
		log:       opts.Logger.With("server", opts.Spec.Name, "seat", opts.Seat),
		status:    Status{State: StateStarting, Since: time.Now()},
		retry:     make(chan struct{}, 1),
		cancel:    cancel,
		transport: ownTransport,
		done:      make(chan struct{}),
	}
	go i.supervise(ctx)
	return i
}

// Status is a snapshot.
func (i *Instance) Status() Status {
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.status
	s.Tools = len(i.tools)
	if i.child != nil {
		s.StderrTail = i.child.tail.String()
	}
	return s
}

// Tools is the last tool list the server answered.
func (i *Instance) Tools() []Tool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.tools)
}

// Retry asks a down server to try again at once and starts its schedule
// afresh (MCP-9). A running server is left alone.
func (i *Instance) Retry() {
	i.opts.Schedule.Reset()
	select {
	case i.retry <- struct{}{}:
	default:
	}
}

// Call runs a tool on the server.
func (i *Instance) Call(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	i.mu.Lock()
	sess, recorded := i.sess, i.recorded
	i.mu.Unlock()
	if sess == nil {
		return nil, i.downError(false)
	}
	var a any
	if len(args) > 0 {
		a = args
	}
	params := &mcp.CallToolParams{Name: name, Arguments: a}
	f := i.flights.add(downstreamFrom(ctx))
	defer i.flights.remove(f)
	if f.token != "" {
		params.SetProgressToken(f.token)
	}
	res, err := sess.CallTool(ctx, params)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The remote could not be reached: its session is as good as
		// ended. End it, so the death watch restarts it on the schedule,
		// and say so in the engine's words. A call that never got a
		// connection was not sent.
		var op *net.OpError
		sent := !(errors.As(err, &op) && op.Op == "dial")
		_ = sess.Close()
		select {
		case <-recorded:
		case <-time.After(2 * time.Second):
		}
		return nil, i.downError(sent)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		// The server answered, with a protocol error of its own.
		return nil, err
	}
	// The connection failed under the call: give the death watch a moment
	// to record it, so the answer says what took the server down.
	select {
	case <-recorded:
	case <-time.After(2 * time.Second):
	}
	return nil, i.downError(true)
}

func (i *Instance) downError(inFlight bool) *DownError {
	i.mu.Lock()
	defer i.mu.Unlock()
	e := &DownError{Server: i.opts.Spec.Name, Cause: i.status.Cause, NextRestart: i.status.NextRestart, InFlight: inFlight}
	switch {
	case e.Cause != "":
	case i.status.State == StateStopped:
		e.Cause = "it was stopped"
	case i.status.State == StateStarting:
		e.Cause = "it is still starting"
	default:
		e.Cause = "its session ended"
	}
	return e
}

// Close stops the server gently then firmly and ends supervision.
func (i *Instance) Close() error {
	i.once.Do(func() {
		i.cancel()
		<-i.done
		if i.transport != nil {
			i.transport.CloseIdleConnections()
		}
	})
	return nil
}

func (i *Instance) setStatus(f func(s *Status)) {
	i.mu.Lock()
	f(&i.status)
	i.mu.Unlock()
}

// supervise is the instance's one goroutine: start, watch, restart.
func (i *Instance) supervise(ctx context.Context) {
	defer close(i.done)
	defer i.setStatus(func(s *Status) { *s = Status{State: StateStopped, Since: time.Now(), Cause: "it was stopped"} })
	spec := i.opts.Spec
	if !spec.CanLaunch() {
		reason := "the spec can never launch: a stdio server needs a command and an http server a url"
		i.log.Error("mcp_server_failed", "reason", reason)
		i.setStatus(func(s *Status) { *s = Status{State: StateFailed, Cause: reason, Since: time.Now()} })
		<-ctx.Done()
		return
	}
	var downSince time.Time
	var was string
	failedBefore := false // a start failed already: later failures are retries
	for {
		if (i.started || failedBefore) && !i.awaitLease(ctx) {
			return
		}
		c, err := i.open(ctx)
		if ctx.Err() != nil {
			if c != nil {
				i.closeConn(c)
			}
			return
		}
		if err != nil {
			tail := ""
			if c != nil {
				// A handshake can succeed and the listing fail after it:
				// the session (and, for a remote, its server-side state)
				// is closed either way.
				if c.child != nil {
					tail = c.child.tail.String()
				}
				i.closeConn(c)
			}
			if tail != "" {
				i.log.Error("server_stderr_tail", "stderr_tail", tail)
			}
			delay := i.opts.Schedule.StartFailed()
			attempt := i.opts.Schedule.Attempt()
			if i.started || failedBefore {
				i.log.Error("server_restart_failed", "attempt", attempt, "error", i.scrub(err.Error()), "retry_in_seconds", int(delay.Seconds()))
			} else {
				i.log.Error("mcp_server_failed", "reason", i.scrub(err.Error()))
				event := "server_start_retry_scheduled"
				if i.opts.Seat != "" {
					event = "mcp_seat_retry_scheduled"
				}
				i.log.Info(event, "attempt", attempt, "retry_in_seconds", int(delay.Seconds()))
			}
			failedBefore = true
			if downSince.IsZero() {
				downSince = time.Now()
			}
			i.setStatus(func(s *Status) {
				*s = Status{State: StateDown, Cause: "it failed to start: " + i.scrub(err.Error()), Since: downSince, NextRestart: time.Now().Add(delay), Attempt: attempt}
			})
			if !i.wait(ctx, delay) {
				return
			}
			continue
		}

		upAt := time.Now()
		if i.started {
			i.log.Info("server_restarted", "attempt", i.opts.Schedule.Attempt(), "down_seconds", int(time.Since(downSince).Seconds()), "was", was)
		}
		i.started = true
		downSince, was = time.Time{}, ""
		i.setStatus(func(s *Status) { *s = Status{State: StateRunning, Since: upAt} })
		if i.opts.OnConnected != nil {
			i.opts.OnConnected()
		}

		// Death watch (MCP-5): the process exiting, or the session ending
		// while the process runs on.
		var exited <-chan struct{}
		if c.child != nil {
			exited = c.child.done
		}
		select {
		case <-ctx.Done():
			// Stopped is in status before the calls in flight are told,
			// so they say the engine stopped it.
			i.setStatus(func(s *Status) { *s = Status{State: StateStopped, Since: time.Now(), Cause: "it was stopped"} })
			i.closeConn(c)
			close(c.recorded)
			return
		case <-exited:
		case <-c.ended:
		}
		cause := "its session ended"
		if c.child != nil {
			select {
			case <-c.child.done:
				cause = "its process " + c.child.exitDescription()
			case <-time.After(100 * time.Millisecond):
				cause = "it closed its session while its process ran on"
			}
		}
		uptime := time.Since(upAt)
		tail := ""
		if c.child != nil {
			tail = c.child.tail.String()
		}
		i.log.Error("server_exited", "cause", cause, "up_seconds", int(uptime.Seconds()), "stderr_tail", tail)
		downSince, was = time.Now(), cause
		delay := i.opts.Schedule.Died(uptime)
		next := time.Now().Add(delay)
		i.setStatus(func(s *Status) {
			*s = Status{State: StateDown, Cause: cause, Since: downSince, NextRestart: next, Attempt: i.opts.Schedule.Attempt()}
		})
		close(c.recorded)
		// Reap whatever the old process left behind before restarting.
		i.closeConn(c)
		if !i.wait(ctx, delay) {
			return
		}
	}
}

// awaitLease holds a restart back until this node proves it holds the
// seat's lease, asking again one heartbeat later each time; false means the
// instance was closed meanwhile (its seat was let go).
func (i *Instance) awaitLease(ctx context.Context) bool {
	for i.opts.Lease != nil && !i.opts.Lease() {
		i.log.Warn("server_restart_held_back", "retry_in_seconds", int(i.opts.Heartbeat.Seconds()))
		t := time.NewTimer(i.opts.Heartbeat)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

// wait sleeps for d, or until a Retry or Close; false means closed.
func (i *Instance) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-i.retry:
	}
	return true
}

// conn is one live connection to the server.
type conn struct {
	cancel   context.CancelFunc // ends the connection's own context
	sess     *mcp.ClientSession
	child    *child
	ended    chan struct{}
	recorded chan struct{}
	rawAnn   *rawAnnotations
}

func (i *Instance) closeConn(c *conn) {
	i.mu.Lock()
	if i.sess == c.sess {
		i.sess, i.ended = nil, nil
	}
	i.child = c.child
	i.mu.Unlock()
	// The SDK's Close waits for the calls in flight to be answered, and a
	// server holding a call would hold it for ever; stopping the child
	// ends those calls, so the child is stopped alongside, not after.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if c.child != nil {
			c.child.stop(i.opts.StopGrace)
		}
	}()
	if c.sess != nil {
		_ = c.sess.Close()
	}
	if c.cancel != nil {
		c.cancel()
	}
	<-stopped
}

// open starts the server (a stdio child) or dials it (http, sse), makes the
// handshake and lists its tools.
func (i *Instance) open(ctx context.Context) (*conn, error) {
	c, err := i.handshake(ctx)
	if errors.Is(err, errRespawn) {
		// The probe was answered on the child's only connection, which a
		// server then takes as its handshake: start it afresh for the
		// session.
		i.closeConn(c)
		c, err = i.handshake(ctx)
	}
	if err != nil {
		return c, err
	}
	lctx, cancel := context.WithTimeout(ctx, i.opts.StartTimeout)
	defer cancel()
	var tools []Tool
	for t, err := range c.sess.Tools(lctx, nil) {
		if err != nil {
			return c, fmt.Errorf("listing its tools: %w", err)
		}
		tools = append(tools, Tool{Def: t, Annotations: c.raw(t.Name)})
	}
	features, err := listFeatures(lctx, c.sess)
	if err != nil {
		return c, err
	}
	c.ended = make(chan struct{})
	c.recorded = make(chan struct{})
	go func(s *mcp.ClientSession, ended chan struct{}) {
		_ = s.Wait()
		close(ended)
	}(c.sess, c.ended)

	i.mu.Lock()
	changed := !sameTools(i.tools, tools)
	first := !i.started
	old := i.tools
	featuresChanged := first || !sameFeatures(i.features, features)
	i.sess, i.ended, i.recorded, i.child, i.tools, i.features = c.sess, c.ended, c.recorded, c.child, tools, features
	i.mu.Unlock()
	if featuresChanged && i.opts.OnFeatures != nil {
		i.opts.OnFeatures(features)
	}
	if changed || first {
		if !first {
			added, removed := diffTools(old, tools)
			i.log.Info("server_catalogue_changed", "added", added, "removed", removed)
		}
		if i.opts.OnTools != nil {
			i.opts.OnTools(slices.Clone(tools))
		}
	}
	return c, nil
}

// errRespawn asks open to start a stdio child again after its probe.
var errRespawn = errors.New("restart the child for a session")

// handshake starts the server (a stdio child) or prepares to dial it,
// probes it with server/discover the first time, and connects with the
// revision the probe chose.
func (i *Instance) handshake(ctx context.Context) (*conn, error) {
	spec := i.opts.Spec
	i.mu.Lock()
	probed, link := i.probed, i.link
	i.mu.Unlock()
	raw := newRawAnnotations()
	raw.notify = i.onNotify
	c := &conn{rawAnn: raw}
	var inner mcp.Transport
	var probe probeResult
	switch spec.Transport {
	case TransportHTTP, TransportSSE:
		base := i.opts.HTTPClient.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc := &http.Client{Transport: headerRT{headers: spec.Headers, base: tapRT{base: base, raw: raw}}, Timeout: i.opts.HTTPClient.Timeout}
		if spec.Transport == TransportSSE {
			// The SSE transport predates server/discover; it is always a
			// session.
			probe = probeResult{err: "the sse transport has no discover"}
			inner = &mcp.SSEClientTransport{Endpoint: spec.URL, HTTPClient: hc}
		} else {
			if !probed {
				probe = probeHTTP(ctx, hc, spec.URL, i.opts.ProbeTimeout)
			}
			inner = &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: hc}
		}
	default:
		ch, err := startChild(spec.Command, spec.Args, ChildEnv(spec, i.opts.Host), i.opts.Dir, func(line string) {
			i.log.Debug("server_stderr", "line", line)
		})
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", spec.Command, err)
		}
		c.child = ch
		i.mu.Lock()
		i.child = ch
		i.mu.Unlock()
		var rest io.Reader = ch.stdout
		if !probed {
			probe, rest = probeStdio(ch.stdin, ch.stdout, i.opts.ProbeTimeout)
		}
		inner = &tapTransport{inner: &mcp.IOTransport{Reader: readCloser{rest, ch.stdout}, Writer: ch.stdin}, raw: raw}
	}
	version := link
	if !probed {
		version = probe.version()
		i.log.Info("server_handshake", "discover_answered", probe.answered, "supported_versions", probe.supported,
			"discover_note", i.scrub(probe.err), "session", version != "")
		// Remember what the server said, not that it said nothing: a probe
		// that timed out while a package was still downloading is asked
		// again on the next start.
		if probe.answered || strings.HasPrefix(probe.err, "it refused") {
			i.mu.Lock()
			i.probed, i.link = true, version
			i.mu.Unlock()
		}
		if c.child != nil && probe.answered && version != "" {
			return c, errRespawn
		}
	}

	// Some transports (legacy SSE) keep the context they were connected
	// with for the connection's life, so the handshake's bound is a timer
	// that cancels only a handshake still under way.
	cctx, ccancel := context.WithCancel(ctx)
	timer := time.AfterFunc(i.opts.StartTimeout, ccancel)
	client := mcp.NewClient(&mcp.Implementation{Name: "crewlet", Version: Version}, i.clientOptions())
	client.AddReceivingMiddleware(i.passElicitation)
	sess, err := client.Connect(cctx, inner, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("the handshake did not finish within %s", i.opts.StartTimeout)
		_ = sess.Close()
	}
	if err != nil {
		ccancel()
		if c.child != nil {
			// The pipe's EOF usually arrives a moment before the exit
			// status: wait briefly so the answer says how it ended.
			select {
			case <-c.child.done:
				return c, fmt.Errorf("its process %s before the handshake finished", c.child.exitDescription())
			case <-time.After(500 * time.Millisecond):
			}
		}
		return c, fmt.Errorf("handshake: %w", err)
	}
	c.sess, c.cancel = sess, ccancel
	return c, nil
}

func (c *conn) raw(tool string) json.RawMessage {
	if c.rawAnn == nil {
		return nil
	}
	return c.rawAnn.get(tool)
}

// headerRT sends the resolved headers on every request to an http server.
type headerRT struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

func toolKey(t Tool) string {
	b, _ := json.Marshal(struct {
		Def *mcp.Tool
		Ann json.RawMessage
	}{t.Def, t.Annotations})
	return string(b)
}

func sameTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if toolKey(a[k]) != toolKey(b[k]) {
			return false
		}
	}
	return true
}

func diffTools(old, cur []Tool) (added, removed []string) {
	had := map[string]bool{}
	for _, t := range old {
		had[t.Def.Name] = true
	}
	has := map[string]bool{}
	for _, t := range cur {
		has[t.Def.Name] = true
		if !had[t.Def.Name] {
			added = append(added, t.Def.Name)
		}
	}
	for n := range had {
		if !has[n] {
			removed = append(removed, n)
		}
	}
	sort.Strings(removed)
	return added, removed
}

// childPID is the current child's pid, 0 if none; for tests and status.
func (i *Instance) childPID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.child == nil {
		return 0
	}
	return i.child.pid()
}

func sameFeatures(a, b Features) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// scrub takes what the server is started with out of a message before it
// is logged, kept as a cause or answered to a caller: Go's HTTP errors quote
// the URL they dialled, and a URL, like a header or an environment value,
// may carry a credential the configuration kept behind a ${VAR}.
func (i *Instance) scrub(msg string) string {
	spec := i.opts.Spec
	if spec.URL != "" {
		msg = strings.ReplaceAll(msg, spec.URL, "the url of "+spec.Name)
		if u, err := url.Parse(spec.URL); err == nil && u.RawQuery != "" {
			msg = strings.ReplaceAll(msg, u.RawQuery, "[REDACTED]")
		}
	}
	for _, m := range []map[string]string{spec.Headers, spec.Env} {
		for _, v := range m {
			if len(v) >= 8 {
				msg = strings.ReplaceAll(msg, v, "[REDACTED]")
			}
		}
	}
	return msg
}
