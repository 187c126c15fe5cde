package hub

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recorder is an observer of every seam, keeping what it was told.
type recorder struct {
	mu     sync.Mutex
	calls  []string // tool source class, one per finished call
	open   int      // calls started and not done
	status []string // server seat state
	hops   []string // server tool error?
}

type ctxMark struct{}

func (r *recorder) CallStarted(ctx context.Context, tool string) (context.Context, CallDone) {
	r.mu.Lock()
	r.open++
	r.mu.Unlock()
	return context.WithValue(ctx, ctxMark{}, tool), func(src Source, res *mcp.CallToolResult) {
		class, _ := servers.ClassOf(res)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.open--
		r.calls = append(r.calls, fmt.Sprintf("%s %s %s", tool, src, class))
	}
}

func (r *recorder) ServerStatus(server, seat string, _, now upstream.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = append(r.status, fmt.Sprintf("%s %q %s", server, seat, now.State))
}

func (r *recorder) HopStarted(ctx context.Context, server, tool string) (context.Context, func(error)) {
	// The hop runs under the call's context: a span opened for the call
	// is the hop's parent.
	parent, _ := ctx.Value(ctxMark{}).(string)
	return ctx, func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.hops = append(r.hops, fmt.Sprintf("%s %s under %s err=%v", server, tool, parent, err != nil))
	}
}

func (r *recorder) snapshot() (calls, status, hops []string, open int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), append([]string(nil), r.status...), append([]string(nil), r.hops...), r.open
}

// Every routed call is observed exactly once with its source and class,
// refusals decided before any tool runs included; a third-party call's
// hop is observed under the call's context; a server's states are
// observed as it starts; and the screen's change feed moves with them.
func TestObserversSeeCallsHopsAndServers(t *testing.T) {
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	rec := &recorder{}
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: up, url: %q}`, up)), func(o *Options) {
		o.Observers = Observers{Calls: rec, Servers: rec, Hops: rec}
	})
	ver, changed := th.operator.changes.watch()
	cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2026-07-28")
	for _, name := range []string{"echo", "echo_up", "no_such_tool"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	calls, status, hops, open := rec.snapshot()
	want := []string{"echo builtin ", "echo_up mcp:up ", "no_such_tool  " + string(authority.NotFound)}
	if fmt.Sprint(calls) != fmt.Sprint(want) || open != 0 {
		t.Fatalf("calls observed %q (%d open), want %q", calls, open, want)
	}
	if fmt.Sprint(hops) != fmt.Sprint([]string{"up echo_up under echo_up err=false"}) {
		t.Fatalf("hops observed %q", hops)
	}
	if len(status) == 0 || status[len(status)-1] != `up "" running` {
		t.Fatalf("server states observed %q", status)
	}
	// A revision applied is a change the screen reads anew.
	if err := th.Apply(th.Company()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change said after an apply")
	}
	if now, _ := th.operator.changes.watch(); now <= ver {
		t.Fatalf("change count %d, was %d", now, ver)
	}
}

// The observers are told in order, each seeing the context the one before
// it made, and their ends are told inner first, as spans nest.
func TestCallObserversNest(t *testing.T) {
	var order []string
	mk := func(name string) CallObserver { return nestObserver{name, &order} }
	obs := CallObservers(nil, mk("outer"), mk("inner"))
	ctx, done := obs.CallStarted(context.Background(), "t")
	if ctx.Value(nestKey("outer")) == nil || ctx.Value(nestKey("inner")) == nil {
		t.Fatal("a later observer did not see the earlier one's context")
	}
	done(SourceBuiltin, &mcp.CallToolResult{})
	if fmt.Sprint(order) != "[start outer start inner done inner done outer]" {
		t.Fatalf("order %v", order)
	}
	if _, ok := CallObservers(nil, nil).(noCalls); !ok {
		t.Fatal("no observers should watch nothing")
	}
}

type nestKey string

type nestObserver struct {
	name  string
	order *[]string
}

func (n nestObserver) CallStarted(ctx context.Context, _ string) (context.Context, CallDone) {
	*n.order = append(*n.order, "start "+n.name)
	return context.WithValue(ctx, nestKey(n.name), true), func(Source, *mcp.CallToolResult) {
		*n.order = append(*n.order, "done "+n.name)
	}
}
