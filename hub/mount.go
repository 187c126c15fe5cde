package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sourcegraph/conc"
)

// mounted is a first-party server the hub runs in-process. Its tools are
// listed over the SDK's in-memory transport, as any client would list them,
// and each tool the servers kit registered is called directly (a function
// call to the very handler the SDK would call, with the same caller and
// proof in the request: servers.Direct), without writing the call to the
// connection and reading the answer back. A tool the kit did not register
// is called over the connection.
//
// That connection can break (a frame past the transport's limit closes it
// for good), and every tool of the server would then answer unavailable
// until the hub restarted. So a mount keeps it: its one goroutine waits for
// the connection to end and makes a new one to the same server, until
// Close, which ends the goroutine and the connection and is safe twice.
type mounted struct {
	name   string
	proof  string
	direct *servers.Direct
	srv    *mcp.Server
	log    *slog.Logger

	mu   sync.Mutex
	conn *mountConn // nil while a broken connection is being replaced
	// ready is closed when conn is set again after a break.
	ready chan struct{}

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	// kept is closed when keep has returned; wg owns the goroutines that
	// watch each connection's end.
	kept      chan struct{}
	wg        conc.WaitGroup
	closeOnce sync.Once
}

// mountConn is one in-process connection to the server.
type mountConn struct {
	server  *mcp.ServerSession
	session *mcp.ClientSession
	ended   chan struct{} // closed once the client session is over
}

// mount connects a first-party server in-process and lists its tools as
// builtin entries.
func mount(ctx context.Context, name string, log *slog.Logger, build func(servers.Trust) *mcp.Server) (*mounted, []Entry, error) {
	trust, direct := servers.InProcess()
	m := &mounted{name: name, proof: direct.Proof(), direct: direct, srv: build(trust), log: log}
	c, err := m.connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", name, err)
	}
	m.conn = c
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.kept = make(chan struct{})
	go func() {
		defer close(m.kept)
		m.keep()
	}()
	var entries []Entry
	for tool, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("mount %s: list tools: %w", name, err)
		}
		e, err := entryFromTool(tool, SourceBuiltin, "", m)
		if err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("mount %s: %w", name, err)
		}
		entries = append(entries, e)
	}
	return m, entries, nil
}

// connect makes one in-process connection to the server.
func (m *mounted) connect(ctx context.Context) (*mountConn, error) {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := m.srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "crewlet", Version: Version}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		ss.Wait()
		return nil, err
	}
	c := &mountConn{server: ss, session: cs, ended: make(chan struct{})}
	// Ended by the connection's own end, which closing it brings.
	m.wg.Go(func() {
		_ = cs.Wait()
		close(c.ended)
	})
	return c, nil
}

func (c *mountConn) close() {
	_ = c.session.Close()
	_ = c.server.Close()
	c.server.Wait()
}

// keep replaces the connection each time it ends, until Close. A failed
// attempt (the server refusing a connection, which an in-process server
// never should) is tried again after a wait that doubles up to a few
// seconds, so a server that keeps failing costs little.
func (m *mounted) keep() {
	for {
		m.mu.Lock()
		c := m.conn
		m.mu.Unlock()
		select {
		case <-m.ctx.Done():
			return
		case <-c.ended:
		}
		m.mu.Lock()
		m.conn, m.ready = nil, make(chan struct{})
		m.mu.Unlock()
		c.close()
		m.log.Error("first_party_connection_broken", "server", m.name,
			"reason", "its in-process connection ended under the hub; connecting again")
		for wait := time.Duration(0); ; wait = min(max(2*wait, 50*time.Millisecond), 5*time.Second) {
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(wait):
			}
			nc, err := m.connect(m.ctx)
			if err == nil {
				m.mu.Lock()
				m.conn = nc
				close(m.ready)
				m.mu.Unlock()
				m.log.Info("first_party_reconnected", "server", m.name)
				break
			}
			if m.ctx.Err() != nil {
				return
			}
			m.log.Error("first_party_reconnect_failed", "server", m.name, "error", err.Error())
		}
	}
}

// current is the connection in place, waiting briefly for one while a
// broken one is being replaced.
func (m *mounted) current(ctx context.Context) *mountConn {
	m.mu.Lock()
	c, ready := m.conn, m.ready
	m.mu.Unlock()
	if c != nil {
		return c
	}
	t := time.NewTimer(reconnectWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-m.ctx.Done():
	case <-t.C:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conn
}

// reconnectWait is how long a call waits for a broken connection to be
// replaced before it is refused.
const reconnectWait = 2 * time.Second

// entryFromTool files a listed tool. A first-party tool states its exact
// hints and delivers in _meta; otherwise hints are read from the raw
// annotations, so an absent hint stays unknown.
func entryFromTool(t *mcp.Tool, src Source, prefix string, b Backend) (Entry, error) {
	in, err := json.Marshal(t.InputSchema)
	if err != nil {
		return Entry{}, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	e := Entry{
		Name:         prefix + t.Name,
		Source:       src,
		Description:  t.Description,
		InputSchema:  in,
		paramHeaders: bytes.Contains(in, []byte(`"x-mcp-header"`)),
		upstream:     t.Name,
		backend:      b,
	}
	if t.OutputSchema != nil {
		if e.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return Entry{}, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
		}
	}
	if raw, ok := t.Meta[servers.MetaHints]; ok {
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &e.Hints); err != nil {
			return Entry{}, fmt.Errorf("tool %s: hints: %w", t.Name, err)
		}
	} else if t.Annotations != nil {
		raw, _ := json.Marshal(t.Annotations)
		e.Hints = servers.HintsFromAnnotations(raw)
	}
	if d, ok := t.Meta[servers.MetaDelivers].(string); ok {
		e.Delivers = d
	}
	e.OperatorOnly = t.Meta[servers.MetaAudience] == servers.AudienceOperator
	return e, nil
}

// Call implements Backend. A call whose connection broke under it is
// refused as unavailable, marked as possibly having taken effect: it was
// sent and no answer came back. The next call has a new connection.
func (m *mounted) Call(ctx context.Context, caller authority.Caller, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	if m.ctx.Err() != nil {
		// Closed: the hub is stopping it, and no call reaches it.
		return nil, m.down("the hub has stopped it", false)
	}
	if res, ok, err := m.direct.Call(ctx, caller, tool, args); ok {
		return res, err
	}
	c := m.current(ctx)
	if c == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, m.down("its in-process connection broke and is being made again", false)
	}
	var a any
	if len(args) > 0 {
		a = args
	}
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{
		Name:      tool,
		Arguments: a,
		Meta:      servers.CallerMeta(caller, m.proof),
	})
	var wire *jsonrpc.Error
	if err == nil || ctx.Err() != nil || errors.As(err, &wire) {
		return res, err
	}
	// The session ends a moment after the transport fails: wait for it
	// briefly, so a broken connection is told from any other failure.
	select {
	case <-c.ended:
		m.log.Warn("first_party_call_lost", "server", m.name, "tool", tool, "error", err.Error())
		return nil, m.down("its in-process connection broke while the call ran, and has been made again", true)
	case <-time.After(time.Second):
		return nil, err
	}
}

func (m *mounted) down(cause string, inFlight bool) *upstream.DownError {
	return &upstream.DownError{Server: m.name, Cause: cause, NextRestart: time.Now(), InFlight: inFlight}
}

// Close ends the keeping and the connection; safe to call twice.
func (m *mounted) Close() error {
	m.closeOnce.Do(func() {
		m.cancel()
		// Once keep has returned, nothing changes conn any more: a
		// connection it made as Close began is closed here with the rest.
		<-m.kept
		m.mu.Lock()
		c := m.conn
		m.mu.Unlock()
		if c != nil {
			c.close()
		}
		m.wg.Wait()
	})
	return nil
}
