package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The soak's clients: idle 2025 sessions that only hold their event
// stream, and active callers that call at a fixed share of the total rate,
// on both revisions; every one of them reaches the hub through one dialer
// that can leave.

// errLeft is what a client that has left gets for a new connection.
var errLeft = errors.New("this client has left")

// leavingDialer dials the hub for every soak client. leave closes every
// connection it made and refuses new ones, as when the clients' machines
// go away: no DELETE reaches the hub and no stream is opened again, so
// the sessions are the hub's to reclaim.
type leavingDialer struct {
	d     net.Dialer
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	gone  bool
}

func newLeavingDialer() *leavingDialer {
	return &leavingDialer{conns: map[*trackedConn]struct{}{}}
}

func (l *leavingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	gone := l.gone
	l.mu.Unlock()
	if gone {
		return nil, errLeft
	}
	c, err := l.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		c.Close()
		return nil, errLeft
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// leave closes every connection and refuses new ones.
func (l *leavingDialer) leave() {
	l.mu.Lock()
	l.gone = true
	conns := l.conns
	l.conns = map[*trackedConn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

func (l *leavingDialer) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

type trackedConn struct {
	net.Conn
	l    *leavingDialer
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// soakClients opens sessions for the clients numbered from..from+n-1, with
// a few at a time: client k speaks rev(k) and presents the token of its
// group (tokenOf).
type soakClients struct {
	url     string
	tr      http.RoundTripper
	tokenOf func(k int) string
}

func (c soakClients) open(ctx context.Context, from, n int, rev func(k int) string) ([]*mcp.ClientSession, error) {
	out := make([]*mcp.ClientSession, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			client := mcp.NewClient(&mcp.Implementation{Name: "crewlet-soak", Version: "0"}, nil)
			for i := range next {
				k := from + i
				hc := &http.Client{Transport: bearerRT{c.tokenOf(k), c.tr}}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: hc},
					&mcp.ClientSessionOptions{ProtocolVersion: rev(k)})
				cancel()
				out[i], errs[i] = cs, err
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			closeAll(nonNil(out))
			return nil, fmt.Errorf("client %d (%s): %w", from+i, rev(from+i), err)
		}
	}
	if ctx.Err() != nil {
		closeAll(nonNil(out))
		return nil, ctx.Err()
	}
	return out, nil
}

func nonNil(ss []*mcp.ClientSession) []*mcp.ClientSession {
	var out []*mcp.ClientSession
	for _, s := range ss {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// closeSessions ends sessions a few at a time.
func closeSessions(ss []*mcp.ClientSession) {
	next := make(chan *mcp.ClientSession)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for s := range next {
				_ = s.Close()
			}
		})
	}
	for _, s := range ss {
		next <- s
	}
	close(next)
	wg.Wait()
}

// alternate gives even clients 2025-11-25 and odd ones 2026-07-28.
func alternate(k int) string {
	if k%2 == 1 {
		return rev2026
	}
	return rev2025
}

func only2025(int) string { return rev2025 }

// callAtRate has each session call once every len(sessions)/rate seconds,
// each at its own phase within that period, so the total rate is rate
// calls/s however long a call takes (a call running past its turn delays
// only that session's next), until ctx ends.
func callAtRate(ctx context.Context, sessions []*mcp.ClientSession, rate float64, callTimeout time.Duration, st *soakState, rec *callLog) {
	every := time.Duration(float64(len(sessions)) / rate * float64(time.Second))
	var wg sync.WaitGroup
	for k, cs := range sessions {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(k), uint64(time.Now().UnixNano())))
			next := time.Now().Add(time.Duration(r.Int64N(int64(every) + 1)))
			t := time.NewTimer(time.Until(next))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				tool := pickTool(r)
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
				began := time.Now()
				res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool.name, Arguments: tool.args(st, r)})
				took := time.Since(began)
				cancel()
				rec.record(tool.kind, took, res, err)
				if err == nil && tool.name == "create_work_item" {
					if key := keyOf(res); key != "" {
						st.add(key)
					}
				}
				next = next.Add(every)
				if now := time.Now(); next.Before(now) {
					next = now
				}
				t.Reset(time.Until(next))
			}
		})
	}
	wg.Wait()
}
