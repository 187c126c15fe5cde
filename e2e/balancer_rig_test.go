package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/hubtest/haproxy"
)

// The balanced fleet's rig: the fleet rig's three nodes behind a real
// HAProxy (the configuration the README gives), and a record of every
// request a client sent through it: which node answered, how, and when,
// so a test can say which calls were in flight on a node when it died.

// balancedFleet is three nodes behind HAProxy.
type balancedFleet struct {
	*fleetRig
	lb   *haproxy.Balancer
	wire *wire
}

// newBalancedFleetOf starts the fleet rig on the company doc writes, with
// env added to every node's environment, and HAProxy in front of it.
func newBalancedFleetOf(t *testing.T, doc func(marker, bin string) string, env ...string) *balancedFleet {
	r := newFleetRigOf(t, false, doc, env...)
	var nodes []haproxy.Node
	for i, h := range r.hubs {
		nodes = append(nodes, haproxy.Node{Name: fmt.Sprintf("n%d", i), Addr: h.addr})
	}
	lb, err := haproxy.Start(t.TempDir(), "127.0.0.1:"+strconv.Itoa(freePort(t)), nodes)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the fleet's: runs before the nodes stop, so no
	// health check of a stopping node is logged as news.
	t.Cleanup(func() {
		if err := lb.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			raw, _ := os.ReadFile(lb.Log)
			t.Logf("haproxy's log:\n%s", tailString(string(raw), 32<<10))
		}
	})
	return &balancedFleet{fleetRig: r, lb: lb, wire: &wire{}}
}

func (b *balancedFleet) mcpURL() string { return "http://" + b.lb.Addr + "/operator/mcp" }

// exchange is one HTTP request a client sent through the balancer.
type exchange struct {
	client  string
	method  string // the JSON-RPC method of a POST; GET or DELETE otherwise
	session string // the Mcp-Session-Id it carried
	node    string // the node that answered, as the balancer says
	status  int    // 0: no answer came
	began   time.Time
	ended   time.Time // when its answer was read to the end or cut
}

// wire records the exchanges of every client of a test.
type wire struct {
	mu  sync.Mutex
	all []*exchange
}

// client is an HTTP client for the operator surface that records each of
// its exchanges under name.
func (w *wire) client(name string) *http.Client {
	return &http.Client{Transport: recorder{w, name, hubtest.Bearer{Token: e2eToken}}}
}

func (w *wire) exchanges(client string) []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []exchange
	for _, x := range w.all {
		if x.client == client {
			out = append(out, *x)
		}
	}
	return out
}

type recorder struct {
	w    *wire
	name string
	base http.RoundTripper
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := &exchange{client: r.name, method: req.Method, session: req.Header.Get("Mcp-Session-Id"), began: time.Now()}
	if req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var msg struct {
				Method string `json:"method"`
			}
			raw, _ := io.ReadAll(body)
			if json.Unmarshal(raw, &msg) == nil && msg.Method != "" {
				x.method = msg.Method
			}
		}
	}
	r.w.mu.Lock()
	r.w.all = append(r.w.all, x)
	r.w.mu.Unlock()
	resp, err := r.base.RoundTrip(req)
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	if err != nil {
		x.ended = time.Now()
		return nil, err
	}
	x.status, x.node = resp.StatusCode, resp.Header.Get(haproxy.NodeHeader)
	resp.Body = &endRecorder{ReadCloser: resp.Body, w: r.w, x: x}
	return resp, nil
}

// endRecorder notes when an answer's body ended: read to its end, cut, or
// closed by the client.
type endRecorder struct {
	io.ReadCloser
	w *wire
	x *exchange
}

func (e *endRecorder) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	if err != nil {
		e.end()
	}
	return n, err
}

func (e *endRecorder) Close() error {
	e.end()
	return e.ReadCloser.Close()
}

func (e *endRecorder) end() {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	if e.x.ended.IsZero() {
		e.x.ended = time.Now()
	}
}

// spread counts a client's answered exchanges by the node that answered.
func spread(xs []exchange) map[string]int {
	out := map[string]int{}
	for _, x := range xs {
		if x.status != 0 {
			out[x.node]++
		}
	}
	return out
}

// methods counts a client's exchanges by JSON-RPC method.
func methods(xs []exchange) map[string]int {
	out := map[string]int{}
	for _, x := range xs {
		out[x.method]++
	}
	return out
}

// describe renders exchanges for a failure message.
func describe(xs []exchange) string {
	var b bytes.Buffer
	for _, x := range xs {
		fmt.Fprintf(&b, "%s %s %s session %q: %d from %q, %s..%s\n", x.client, x.method, x.began.Format("15:04:05.000"), x.session, x.status, x.node,
			x.began.Format("15:04:05.000"), x.ended.Format("15:04:05.000"))
	}
	return strings.TrimSpace(b.String())
}
