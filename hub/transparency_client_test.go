//lint:file-ignore SA1019 the rig plays clients of the session revisions, which still ask for log lines and answer sampling and roots.

package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzTransparency's clients: go-sdk client sessions of either revision, what
// they were told while a call ran, and what they were asked.

// notesSeen gathers the notifications a client session received, as JSON
// the comparison reads.
type notesSeen struct {
	mu    sync.Mutex
	notes []map[string]any
	more  chan struct{} // signalled on each arrival
}

func newNotesSeen() *notesSeen { return &notesSeen{more: make(chan struct{}, 1)} }

func (s *notesSeen) add(method string, params any) {
	b, err := json.Marshal(params)
	var v any
	if err == nil {
		v = canonical(b)
	} else {
		v = "unencodable: " + err.Error()
	}
	s.mu.Lock()
	s.notes = append(s.notes, map[string]any{"method": method, "params": v})
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// isEnd tells the end of the notes of the call whose progress token is
// token.
func isEnd(n map[string]any, token string) bool {
	params, _ := n["params"].(map[string]any)
	return n["method"] == "notifications/progress" && params["progressToken"] == token && params["message"] == endOfNotes
}

// ended reports whether the end of the notes of the call with token came.
func (s *notesSeen) ended(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.notes, func(n map[string]any) bool { return isEnd(n, token) })
}

// awaitEnd waits for the end of the notes of the call with token, and
// reports whether it came within d: a bound on a hub that lost it, which
// the comparison then shows.
func (s *notesSeen) awaitEnd(token string, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !s.ended(token) {
		select {
		case <-s.more:
		case <-deadline.C:
			return false
		}
	}
	return true
}

// take answers and forgets what arrived.
func (s *notesSeen) take() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.notes
	s.notes = nil
	return out
}

// rigClient is a client session and what it was told.
type rigClient struct {
	cs       *mcp.ClientSession
	seen     *notesSeen
	asked    *askedSeen
	revision string
	// transport makes the client's connection: to an HTTP endpoint, or a
	// stdio server's new process.
	transport func() mcp.Transport
}

// dialRig connects a go-sdk client on revision to endpoint, presenting
// token when one is given, asking for every log line.
func dialRig(tb testing.TB, endpoint, token, revision string) *rigClient {
	tb.Helper()
	hc := http.DefaultClient
	if token != "" {
		hc = hubtest.Client(token)
	}
	return dialWith(tb, revision, func() mcp.Transport {
		return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}
	})
}

func dialWith(tb testing.TB, revision string, transport func() mcp.Transport) *rigClient {
	tb.Helper()
	c := &rigClient{revision: revision, transport: transport}
	c.dial(tb)
	return c
}

// dial opens the client's session. The SDK's client ends its session on
// an answer it cannot read, so a call that failed so is followed by a new
// one.
func (c *rigClient) dial(tb testing.TB) {
	tb.Helper()
	seen, asked := newNotesSeen(), &askedSeen{}
	opts := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			seen.add("notifications/progress", req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			seen.add("notifications/message", req.Params)
		},
	}
	answering(opts, asked)
	client := mcp.NewClient(&mcp.Implementation{Name: "transparency", Version: "0"}, opts)
	client.AddRoots(rigRoots...)
	client.AddReceivingMiddleware(recordRoots(asked))
	cs, err := client.Connect(context.Background(), c.transport(), &mcp.ClientSessionOptions{ProtocolVersion: c.revision})
	if err != nil {
		tb.Fatalf("connect on %s: %v", c.revision, err)
	}
	if c.revision < "2026-07-28" {
		if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			tb.Fatalf("logging level on %s: %v", c.revision, err)
		}
	}
	if c.cs != nil {
		_ = c.cs.Close()
	} else {
		tb.Cleanup(func() { _ = c.cs.Close() })
	}
	c.cs, c.seen, c.asked = cs, seen, asked
}

// callKeys makes every call's key unique across the rig's life.
var callKeys atomic.Int64

// outcome is what a client made of one call: a result, or the error the
// call failed with, and the notifications that came while it ran.
type outcome struct {
	res   *mcp.CallToolResult
	err   error
	notes []map[string]any
	// asked is what the client was asked while the call ran; got what
	// the server got back.
	asked []askSeen
	got   []any
}

// ownNotes keeps the notifications of the call whose progress token is
// token: a log line, or progress with that token. The token, the client's
// own and different for each call, is written as "own".
func ownNotes(notes []map[string]any, token string) []map[string]any {
	var out []map[string]any
	for _, n := range notes {
		if params, ok := n["params"].(map[string]any); ok && n["method"] == "notifications/progress" {
			if params["progressToken"] != token {
				continue
			}
			params["progressToken"] = "own"
		}
		out = append(out, n)
	}
	return out
}

// call runs tool with the script and gathers the notes that came with it.
// streamed says the server writes the answer on a stream (an event stream,
// or stdio), which it ends with endOfNotes. drain is set for a client of
// the hub, whose failed result may be a refusal of an answer the hub could
// not read to its end, so the end of the notes may never come.
func (c *rigClient) call(tb testing.TB, g scripted, tool string, sc *script, streamed, drain bool) outcome {
	tb.Helper()
	key := "k" + strconv.FormatInt(callKeys.Add(1), 10)
	token := "progress-" + key
	g.set(key, sc)
	defer g.drop(key)
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"key": key}}
	// A token of the call's own, so a progress notification late for
	// one call is never taken for the next's.
	params.SetProgressToken(token)
	if c.revision >= "2026-07-28" {
		// A 2026-07-28 client asks for log lines in the request itself.
		params.Meta[mcp.MetaKeyLogLevel] = "debug"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, params)
	var wire *jsonrpc.Error
	broken := err != nil && !errors.As(err, &wire)
	closed := false
	switch {
	case !streamed || c.seen.ended(token):
	case broken || drain && res != nil && res.IsError || err != nil && sc.asks() > 0:
		// The end of the notes may never come: the client (or the hub's
		// link) could not read the stream to its end, or a client that
		// could not answer a 2026-07-28 server's input requests never
		// made the call that the script's answer goes to. Closing the
		// session runs the client's queue of notifications to its end
		// before it returns, so what was read is in, and nothing later.
		_ = c.cs.Close()
		closed = true
	default:
		c.seen.awaitEnd(token, 10*time.Second)
	}
	o := outcome{res: res, err: err, notes: ownNotes(c.seen.take(), token), asked: c.asked.take(), got: g.got(key)}
	if broken || closed {
		c.dial(tb)
	}
	return o
}
