package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the soak counts: every call by its kind, answered or failed and how,
// with its latency, in windows of --interval; the hub's footprint at the
// end of each window.

// Kinds of call in the soak.
const (
	kindForward = "forward" // the HTTP echo, through the hub
	kindRead    = "read"    // list_work_items, get_work_item
	kindWrite   = "write"   // create_work_item, comment_on_work_item
)

var soakKinds = []string{kindForward, kindRead, kindWrite}

// Outcomes of a call. A refusal the hub documents (a refusal class from its
// registry, or an HTTP 429 or 503 with Retry-After: a cap, the connection
// cap) is counted apart from a failure, which the soak should never see.
const (
	outcomeTimeout   = "timeout"
	outcomeTransport = "transport"
	outcomeToolError = "tool error" // isError without a class of the hub's
	outcomeOther     = "other"
)

// refusalPrefix marks an outcome that is a documented refusal.
const refusalPrefix = "refused "

// classify names what became of a call that was not answered as asked.
// notFoundOK: a read or comment of a key not filed yet may be refused
// not_found, which is the tracker's documented answer.
func classify(res *mcp.CallToolResult, err error) string {
	switch {
	case err == nil && !res.IsError:
		return ""
	case err == nil:
		if c, ok := servers.ClassOf(res); ok {
			return refusalPrefix + string(c)
		}
		return outcomeToolError
	case errors.Is(err, context.DeadlineExceeded):
		return outcomeTimeout
	}
	msg := err.Error()
	// The go-sdk client says a refused POST by its status text.
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		if strings.Contains(msg, http.StatusText(code)) || strings.Contains(msg, strconv.Itoa(code)+" ") {
			return refusalPrefix + "HTTP " + strconv.Itoa(code)
		}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection refused") {
		return outcomeTransport
	}
	return outcomeOther
}

// window is one interval's calls.
type window struct {
	latencies map[string][]time.Duration // answered calls, by kind
	outcomes  map[string]map[string]int  // failed and refused calls, by kind, by outcome
	first     map[string]string          // the first failure's words, by outcome
}

func newWindow() *window {
	return &window{latencies: map[string][]time.Duration{}, outcomes: map[string]map[string]int{}, first: map[string]string{}}
}

// callLog collects calls from every caller into the current window.
type callLog struct {
	mu  sync.Mutex
	cur *window
}

func newCallLog() *callLog { return &callLog{cur: newWindow()} }

func (r *callLog) record(kind string, took time.Duration, res *mcp.CallToolResult, err error) {
	outcome := classify(res, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.cur
	if outcome == "" {
		w.latencies[kind] = append(w.latencies[kind], took)
		return
	}
	if w.outcomes[kind] == nil {
		w.outcomes[kind] = map[string]int{}
	}
	w.outcomes[kind][outcome]++
	if _, ok := w.first[outcome]; !ok {
		switch {
		case err != nil:
			w.first[outcome] = err.Error()
		default:
			w.first[outcome] = textOfResult(res)
		}
	}
}

// cut ends the current window and starts the next.
func (r *callLog) cut() *window {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.cur
	r.cur = newWindow()
	return w
}

// kindRow is one kind's calls in one window.
type kindRow struct {
	answered       int
	refused        int // documented refusals
	failed         int // everything else
	p50, p99, peak time.Duration
}

func (w *window) row(kind string) kindRow {
	lat := slices.Clone(w.latencies[kind])
	slices.Sort(lat)
	k := kindRow{answered: len(lat)}
	if len(lat) > 0 {
		k.p50, k.p99, k.peak = quantile(lat, 0.50), quantile(lat, 0.99), lat[len(lat)-1]
	}
	for o, n := range w.outcomes[kind] {
		if strings.HasPrefix(o, refusalPrefix) {
			k.refused += n
		} else {
			k.failed += n
		}
	}
	return k
}

// merge adds o's calls to w (for a phase's totals).
func (w *window) merge(o *window) {
	for k, l := range o.latencies {
		w.latencies[k] = append(w.latencies[k], l...)
	}
	for k, m := range o.outcomes {
		if w.outcomes[k] == nil {
			w.outcomes[k] = map[string]int{}
		}
		for out, n := range m {
			w.outcomes[k][out] += n
		}
	}
	for out, s := range o.first {
		if _, ok := w.first[out]; !ok {
			w.first[out] = s
		}
	}
}

// failures are the calls that failed other than by a documented refusal.
func (w *window) failures() int {
	n := 0
	for _, k := range soakKinds {
		n += w.row(k).failed
	}
	return n
}

// outcomeLines says every outcome other than an answer, by kind, with the
// first words seen for each.
func (w *window) outcomeLines() []string {
	var out []string
	for _, k := range soakKinds {
		var names []string
		for o := range w.outcomes[k] {
			names = append(names, o)
		}
		sort.Strings(names)
		for _, o := range names {
			out = append(out, fmt.Sprintf("%s %s: %d (first: %s)", k, o, w.outcomes[k][o], clipText(w.first[o], 160)))
		}
	}
	return out
}

func clipText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func msText(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// printWindowHeader and printWindow write one line per window: each kind's
// answered/refused/failed and p50/p99/max in ms, then the hub's footprint.
func printWindowHeader(w io.Writer) {
	fmt.Fprintf(w, "  %-8s", "window")
	for _, k := range soakKinds {
		fmt.Fprintf(w, " | %-7s ok/ref/fail  p50/p99/max ms   ", k)
	}
	fmt.Fprintf(w, " | rss MiB  heap MiB  goroutines  fds  sessions\n")
}

func printWindow(w io.Writer, label string, win *window, s sample) {
	fmt.Fprintf(w, "  %-8s", label)
	for _, k := range soakKinds {
		r := win.row(k)
		fmt.Fprintf(w, " | %6d/%d/%d %6s/%6s/%7s ", r.answered, r.refused, r.failed, msText(r.p50), msText(r.p99), msText(r.peak))
	}
	fmt.Fprintf(w, " | %7.1f  %8.1f  %10d  %4d  %8d\n", float64(s.rssKiB)/1024, s.heapMiB, s.goroutines, s.files, s.sessions)
}

// soakOut is where the soak prints; a variable so a test reads it.
var soakOut io.Writer = os.Stdout
