package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cutStream is a response writer that cuts its connection once the first
// event of the answer has reached the client: a stream broken mid-answer,
// as a proxy or a network drop breaks one. cut is closed once it is cut.
type cutStream struct {
	http.ResponseWriter
	once sync.Once
	cut  chan struct{}
	done bool
}

func (c *cutStream) Write(p []byte) (int, error) {
	if c.done {
		return 0, net.ErrClosed
	}
	n, err := c.ResponseWriter.Write(p)
	if err != nil || !strings.Contains(string(p), "\n\n") {
		return n, err
	}
	// The first whole event is written: send it, then drop the
	// connection under the rest.
	_ = http.NewResponseController(c.ResponseWriter).Flush()
	c.done = true
	c.once.Do(func() {
		if conn, _, err := http.NewResponseController(c.ResponseWriter).Hijack(); err == nil {
			conn.Close()
		}
		close(c.cut)
	})
	return n, nil
}

func (c *cutStream) Flush() {
	if !c.done {
		_ = http.NewResponseController(c.ResponseWriter).Flush()
	}
}

// Issue 25 defect 8: a call whose event stream breaks before its answer is
// resumed after the last event read (a GET with Last-Event-ID), as the
// SDK's client resumes it, and answered once: the server, which keeps its
// events (a go-sdk server with an event store), replays the answer.
func TestCallResumesABrokenStream(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "resumable", Version: "0"}, nil)
	cut := make(chan struct{})
	var calls atomic.Int32
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "answers once its stream was cut"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, textOut, error) {
			calls.Add(1)
			select {
			case <-cut:
			case <-ctx.Done():
			}
			return nil, textOut{Text: "the answer after the break"}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	var resumes []string
	var mu sync.Mutex
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			mu.Lock()
			resumes = append(resumes, r.Header.Get("Last-Event-ID"))
			mu.Unlock()
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), `"tools/call"`) {
				w = &cutStream{ResponseWriter: w, cut: cut}
			}
		}
		h.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	in := rigInstance(t, Resolved{Name: "resumable", Transport: TransportHTTP, URL: "http://" + ln.Addr().String() + "/"}, false)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, res, err := in.CallRaw(ctx, "slow", json.RawMessage(`{}`))
	if err != nil || res != nil || !strings.Contains(string(raw), "the answer after the break") {
		t.Fatalf("a call whose stream broke answered %s, %v, %v", raw, res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resumes) == 0 {
		t.Fatal("the answer came without the stream being resumed: the test cut nothing")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the server ran the tool %d times; want once", n)
	}
}
