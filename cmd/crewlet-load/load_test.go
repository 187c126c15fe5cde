package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// quantile is the nearest rank: the smallest value with at least q of the
// values at or below it.
func TestQuantileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(i + 1)
	}
	ten := hundred[:10]
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", []time.Duration{ms(7)}, 0.99, ms(7)},
		{"one at p50", []time.Duration{ms(7)}, 0.5, ms(7)},
		{"median of ten", ten, 0.50, ms(5)},
		{"p99 of ten is the largest", ten, 0.99, ms(10)},
		{"p90 of ten", ten, 0.90, ms(9)},
		{"p50 of a hundred", hundred, 0.50, ms(50)},
		{"p99 of a hundred", hundred, 0.99, ms(99)},
		{"q 0 is the smallest", hundred, 0, ms(1)},
		{"q 1 is the largest", hundred, 1, ms(100)},
		{"median of two is the lower", []time.Duration{ms(1), ms(2)}, 0.5, ms(1)},
	} {
		if got := quantile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: quantile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestRateIsCallsPerSecond(t *testing.T) {
	for _, tc := range []struct {
		calls   int64
		elapsed time.Duration
		want    float64
	}{
		{100, 2 * time.Second, 50},
		{3, 1500 * time.Millisecond, 2},
		{0, time.Second, 0},
		{10, 0, 0}, // no window: no rate, not infinity
		{10, -time.Second, 0},
	} {
		if got := (measurement{calls: tc.calls, elapsed: tc.elapsed}).rate(); got != tc.want {
			t.Errorf("%d calls in %s: rate %v, want %v", tc.calls, tc.elapsed, got, tc.want)
		}
	}
}

// The median round is the one whose rate is in the middle; of an even
// count, the lower middle one. The rounds given are left in their order.
func TestMedianRound(t *testing.T) {
	round := func(calls int64) measurement { return measurement{calls: calls, elapsed: time.Second} }
	for _, tc := range []struct {
		calls []int64
		want  int64
	}{
		{[]int64{5}, 5},
		{[]int64{9, 1, 5}, 5},
		{[]int64{4, 1, 3, 2}, 2},
		{[]int64{7, 7, 1}, 7},
	} {
		var ms []measurement
		for _, c := range tc.calls {
			ms = append(ms, round(c))
		}
		if got := median(ms).calls; got != tc.want {
			t.Errorf("median of %v = %d, want %d", tc.calls, got, tc.want)
		}
		for i, c := range tc.calls {
			if ms[i].calls != c {
				t.Fatalf("median reordered its input: %v", ms)
			}
		}
	}
}

// The bearer header is sent when there is a token, and no header at all
// when there is none (the direct path).
func TestBearerRT(t *testing.T) {
	got := make(chan []string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Values("Authorization")
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for token, want := range map[string]string{"t0k3n": "[Bearer t0k3n]", "": "[]"} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		resp, err := bearerRT{token, tr}.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := <-got; fmt.Sprint(h) != want {
			t.Errorf("token %q sent %v, want %s", token, h, want)
		}
		if len(req.Header.Values("Authorization")) != 0 {
			t.Error("the caller's request was changed")
		}
	}
}

// measure against a real echo server over streamable HTTP: every call it
// counts answered the echo text, no call is started beyond the bound, and
// the latencies it reports are ordered.
func TestMeasureCountsAnsweredCalls(t *testing.T) {
	srv := httptest.NewServer(echoHandler())
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	m, err := measure(context.Background(), target{path: "direct http", url: srv.URL, tool: "echo"}, 3,
		loadOptions{duration: 10 * time.Second, maxCalls: 60, callTimeout: 5 * time.Second, transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	// The call bound ends the run long before the duration does.
	if m.calls != 60 || m.failed != 0 || m.sessions != 3 {
		t.Fatalf("calls %d failed %d sessions %d, want 60 calls, none failed, 3 sessions", m.calls, m.failed, m.sessions)
	}
	if m.p50 <= 0 || m.p50 > m.p99 || m.elapsed <= 0 || m.elapsed >= 10*time.Second || m.rate() <= 0 {
		t.Fatalf("p50 %v p99 %v elapsed %v rate %v", m.p50, m.p99, m.elapsed, m.rate())
	}

	// A tool that is not there fails the warm-up call, with its own error,
	// before anything is measured.
	if _, err := measure(context.Background(), target{path: "direct http", url: srv.URL, tool: "no_such_tool"}, 1,
		loadOptions{duration: time.Second, maxCalls: 10, callTimeout: 5 * time.Second, transport: tr}); err == nil {
		t.Fatal("a missing tool was measured")
	}
}
