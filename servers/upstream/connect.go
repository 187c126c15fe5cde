package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conn is one live connection to the server.
type conn struct {
	cancel   context.CancelFunc // ends the connection's own context
	sess     *mcp.ClientSession
	calls    link // nil when the session carries no tool calls
	child    *child
	ended    chan struct{}
	recorded chan struct{}
	rawAnn   *rawAnnotations
	// relist is the state of listing its tools again when the server
	// says they changed (relist.go).
	relist relister
}

func (i *Instance) closeConn(c *conn) {
	i.mu.Lock()
	i.forgetLocked(c)
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
			if lctx.Err() != nil && ctx.Err() == nil {
				return c, fmt.Errorf("it did not list its tools in %s", seconds(i.opts.StartTimeout))
			}
			return c, fmt.Errorf("listing its tools: %w", err)
		}
		tools = append(tools, Tool{Def: t, Annotations: c.raw(t.Name)})
	}
	features, err := listFeatures(lctx, c.sess)
	if err != nil {
		return c, err
	}
	if c.child != nil {
		// What a launcher started beneath it is there by now.
		c.child.look()
	}
	c.ended = make(chan struct{})
	c.recorded = make(chan struct{})
	sess, ended := c.sess, c.ended
	i.wg.Go(func() {
		_ = sess.Wait()
		close(ended)
	})

	setup, calls := c.readyLink(tools)
	// Held from the listing's filing to its hand-over, so a listing again
	// (relist.go) hands on after this one, never before it.
	i.listMu.Lock()
	defer i.listMu.Unlock()
	i.mu.Lock()
	i.calls, i.callSetup = calls, setup
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
	i.relistReady(c)
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
	c := &conn{rawAnn: raw}
	raw.notify = func(method string, params json.RawMessage) {
		if method == "notifications/tools/list_changed" {
			i.toolsListChanged(c)
			return
		}
		i.onNotify(method, params)
	}
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
			lk := newSharedLink(i, false)
			inner = &tapTransport{inner: &mcp.SSEClientTransport{Endpoint: spec.URL, HTTPClient: hc, MaxEventSize: maxMessage}, raw: raw, link: lk}
			c.calls = lk
		} else {
			if !probed {
				probe = probeHTTP(ctx, hc, spec.URL, i.client(), i.opts.ProbeTimeout)
			}
			inner = &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: hc, MaxEventSize: maxMessage}
			// Calls skip the tap: it reads tools/list answers and the
			// notifications of the session's own streams, and a call's
			// link reads its stream itself.
			c.calls = &streamLink{i: i, life: ctx, transport: &mcp.StreamableClientTransport{Endpoint: spec.URL, MaxEventSize: maxMessage,
				HTTPClient: &http.Client{Transport: sessionRT{headers: spec.Headers, base: base}, Timeout: i.opts.HTTPClient.Timeout}}}
		}
	default:
		ch, err := startChild(spec.Command, spec.Args, ChildEnv(spec, i.opts.Host), i.opts.Dir, func(line string) {
			i.log.Debug("server_stderr", "line", line)
		}, treeWatch{ledger: i.opts.Ledger, every: i.opts.WatchTree})
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", spec.Command, err)
		}
		c.child = ch
		i.mu.Lock()
		i.child = ch
		i.mu.Unlock()
		var rest io.Reader = ch.stdout
		if !probed {
			probe, rest = probeStdio(ch.stdin, ch.stdout, i.client(), i.opts.ProbeTimeout)
		}
		lk := newSharedLink(i, true)
		out := readCloser{newStdioGuard(rest, lk.refuse), ch.stdout}
		inner = &tapTransport{inner: &mcp.IOTransport{Reader: out, Writer: ch.stdin}, raw: raw, link: lk, notify: true}
		c.calls = lk
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
	client := mcp.NewClient(i.client(), i.clientOptions())
	client.AddReceivingMiddleware(i.passElicitation)
	sess, err := client.Connect(cctx, inner, &mcp.ClientSessionOptions{ProtocolVersion: version})
	timedOut := !timer.Stop()
	if timedOut && err == nil {
		_ = sess.Close()
	}
	if timedOut {
		// Said before anything else: ending the handshake closes the
		// child's stdin, and a server that then exits cleanly would
		// otherwise be reported as having exited with status 0.
		ccancel()
		return c, fmt.Errorf("it did not answer the handshake in %s", seconds(i.opts.StartTimeout))
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

// readyLink readies the connection's link once the session is open: the
// revision it speaks, its session id, the _meta its requests carry (from
// 2026-07-28 on, as the SDK's client wrote it on its own requests), and
// the tools whose arguments travel in headers too.
func (c *conn) readyLink(tools []Tool) (linkSetup, link) {
	if c.calls == nil || c.sess == nil || c.sess.InitializeResult() == nil {
		return linkSetup{}, nil
	}
	setup := linkSetup{version: c.sess.InitializeResult().ProtocolVersion}
	if setup.version >= modernVersion {
		setup.meta = c.rawAnn.requestMeta()
	}
	switch lk := c.calls.(type) {
	case *streamLink:
		lk.session, lk.version, lk.meta = c.sess.ID(), setup.version, setup.meta
		if setup.version >= modernVersion {
			// The SDK sets a 2026-07-28 request's standard headers from
			// its body; parameter headers it sets only in CallTool.
			for _, t := range tools {
				if b := paramBindings(t.Def.InputSchema); b != nil {
					if setup.headerArgs == nil {
						setup.headerArgs = map[string][]paramBinding{}
					}
					setup.headerArgs[t.Def.Name] = b
				}
			}
		}
	case *sharedLink:
		lk.meta = setup.meta
	}
	return setup, c.calls
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
		setHeaders(r.Header, h.headers)
	}
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// setHeaders puts a server's configured headers on a request, over any the
// hub set of the same name.
func setHeaders(h http.Header, headers map[string]string) {
	for k, v := range headers {
		h.Set(k, v)
	}
}

// client is how the hub names itself to a server (MCP-3): crewlet, at the
// version the hub was built as.
func (i *Instance) client() *mcp.Implementation {
	return &mcp.Implementation{Name: "crewlet", Version: i.opts.Version}
}

// seconds says a bound as an operator configured it, in seconds
// (startup_timeout_seconds): "60 s", "0.5 s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// forgetLocked stops offering c's session to new calls (i.mu held): done
// in the same step as the status saying the server is down or stopped, so
// a call that reads that status was never sent to the dead session, and
// is not told it may have taken effect.
func (i *Instance) forgetLocked(c *conn) {
	if i.sess == c.sess {
		i.sess, i.ended, i.calls = nil, nil, nil
	}
}
