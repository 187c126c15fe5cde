package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// target is one way of reaching a tool: the echo tool directly or through
// the hub, or one of the hub's own first-party tools.
type target struct {
	path   string // as shown in the table
	rev    string // the protocol revision its client sessions speak
	url    string
	token  string // bearer token, "" for none
	tool   string
	client string // clientSDK ("" too) or clientLean
	direct bool   // a baseline: the hub's rows of the same revision and baseline are compared with it
	// baseline names the direct row an echo row is compared with ("http",
	// "session").
	baseline string
	// args gives the arguments of a session's n-th call; nil: the echo text.
	args func(session, n int) map[string]any
	// check judges an answer; nil: it must be the echo text.
	check func(answer) error
	cpu   cpuRoles
	// runtime is the hub's GET /debug/runtime, which says what the hub
	// allocated during a measurement; "" on the direct path.
	runtime string
}

// measurement is one row of the table.
type measurement struct {
	target   target
	sessions int
	calls    int64
	failed   int64
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      cpuUse // spent during the measured window, by role
	allocs   allocUse
}

func (m measurement) rate() float64 {
	if m.elapsed <= 0 {
		return 0
	}
	return float64(m.calls) / m.elapsed.Seconds()
}

type bearerRT struct {
	token string
	base  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// loadOptions bound one measurement in time and in count.
type loadOptions struct {
	duration    time.Duration
	maxCalls    int64         // across all sessions
	callTimeout time.Duration // per call
	transport   *http.Transport
	// stalled, if set, is called (from a timer's goroutine) when a call has
	// gone unanswered for stallAfter, while it still waits.
	stalled    func()
	stallAfter time.Duration
}

const echoText = "hello from crewlet-load"

// connect opens n go-sdk client sessions to t, on t's revision: a
// 2025-11-25 session initializes and opens its event stream, a 2026-07-28
// one discovers and then sends each request on its own, as any go-sdk
// client of that revision does.
func connect(ctx context.Context, t target, n int, tr http.RoundTripper) ([]*mcp.ClientSession, error) {
	hc := &http.Client{Transport: bearerRT{t.token, tr}}
	out := make([]*mcp.ClientSession, 0, n)
	for range n {
		cs, err := connectOne(ctx, t, hc)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

func connectOne(ctx context.Context, t target, hc *http.Client) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "crewlet-load", Version: "0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: t.url, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: t.rev})
	if err != nil {
		return nil, fmt.Errorf("%s (%s): connect: %w", t.path, t.rev, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; t.rev != "" && got != t.rev {
		_ = cs.Close()
		return nil, fmt.Errorf("%s: asked for revision %s, the server chose %s", t.path, t.rev, got)
	}
	return cs, nil
}

// dial opens a row's n sessions with the row's client.
func dial(ctx context.Context, t target, n int, tr http.RoundTripper) ([]caller, error) {
	out := make([]caller, 0, n)
	fail := func(err error) ([]caller, error) {
		for _, c := range out {
			c.close()
		}
		return nil, err
	}
	if t.client != clientLean {
		ss, err := connect(ctx, t, n, tr)
		if err != nil {
			return nil, err
		}
		for _, cs := range ss {
			out = append(out, sdkCaller{cs})
		}
		return out, nil
	}
	for k := range n {
		c, err := leanDial(ctx, t, tr, t.argsOf(k, -1))
		if err != nil {
			return fail(err)
		}
		out = append(out, c)
	}
	return out, nil
}

func closeAll(ss []*mcp.ClientSession) {
	for _, s := range ss {
		_ = s.Close()
	}
}

// clientName is the client of the row, as the table shows it.
func (t target) clientName() string { return cmp.Or(t.client, clientSDK) }

// argsOf is the arguments of a session's n-th call.
func (t target) argsOf(session, n int) map[string]any {
	if t.args != nil {
		return t.args(session, n)
	}
	return map[string]any{"text": echoText}
}

func callOnce(ctx context.Context, c caller, t target, session, n int, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a, err := c.call(cctx, t.tool, t.argsOf(session, n))
	if err != nil {
		return err
	}
	if t.check != nil {
		return t.check(a)
	}
	if a.isError || len(a.content) != 1 {
		return fmt.Errorf("%s answered an error or an unexpected result: %+v", t.tool, a.content)
	}
	if c := a.content[0]; c.kind != "text" || c.text != echoText {
		return fmt.Errorf("%s answered something other than its text", t.tool)
	}
	return nil
}

// measure runs n sessions, each calling t's tool back to back (a closed
// loop: a session sends its next call when the last one answered), until the
// duration is over or maxCalls calls were started.
func measure(ctx context.Context, t target, n int, o loadOptions) (measurement, error) {
	m := measurement{target: t, sessions: n}
	sessions, err := dial(ctx, t, n, o.transport)
	if err != nil {
		return m, err
	}
	defer func() {
		for _, c := range sessions {
			c.close()
		}
	}()
	// One call per session before the clock starts: connections are open
	// and the path is proven to work, so a broken setup fails here with its
	// own error instead of as a row of failures.
	for k, cs := range sessions {
		if err := callOnce(ctx, cs, t, k, -1, o.callTimeout); err != nil {
			return m, fmt.Errorf("%s (%s): warm-up call: %w", t.path, t.rev, err)
		}
	}

	var started, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	lat := make([][]time.Duration, n)
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	alloc0, allocOK := sampleAllocs(ctx, t.runtime, o.transport, t.token)
	cpu0 := sampleCPU(t.cpu)
	begin := time.Now()
	for k, cs := range sessions {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1024)
			for i := 0; runCtx.Err() == nil && started.Add(1) <= o.maxCalls; i++ {
				t0 := time.Now()
				// The call gets its own bound, not runCtx's: a call in
				// flight when the duration ends is let finish, so the
				// end of the window is not counted as a failure.
				var watch *time.Timer
				if o.stalled != nil {
					watch = time.AfterFunc(o.stallAfter, o.stalled)
				}
				err := callOnce(ctx, cs, t, k, i, o.callTimeout)
				d := time.Since(t0)
				if watch != nil {
					watch.Stop()
				}
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				mine = append(mine, d)
			}
			lat[k] = mine
		})
	}
	wg.Wait()
	m.elapsed = time.Since(begin)
	m.cpu = sampleCPU(t.cpu).sub(cpu0)
	if alloc1, ok := sampleAllocs(ctx, t.runtime, o.transport, t.token); ok && allocOK {
		m.allocs = alloc1.sub(alloc0)
	}
	if ctx.Err() != nil {
		return m, ctx.Err()
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	m.calls, m.failed = int64(len(all)), failed.Load()
	m.p50, m.p99 = quantile(all, 0.50), quantile(all, 0.99)
	if m.failed > 0 {
		fmt.Printf("  %s x%d (%s): %d calls failed; first: %v\n", t.path, n, t.rev, m.failed, firstErr)
	}
	if m.calls == 0 {
		return m, errors.Join(fmt.Errorf("%s (%s): no call succeeded", t.path, t.rev), firstErr)
	}
	return m, nil
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
