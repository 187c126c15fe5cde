package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// printTable prints every row, and for each hub row that calls the echo
// the ratio of its calls/s to its direct baseline (same revision, same
// client, same sessions, same kind of upstream) and what the hub added to
// the median latency.
func printTable(out io.Writer, rows []measurement) {
	if len(rows) == 0 {
		return
	}
	type key struct {
		rev      string
		client   string
		sessions int
		baseline string
	}
	direct := map[key]measurement{}
	for _, m := range rows {
		if m.target.direct {
			direct[key{m.target.rev, m.target.clientName(), m.sessions, m.target.baseline}] = m
		}
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "path\trevision\tclient\tsessions\tcalls/s\tp50\tp99\tfailed\thub/direct\t+p50\tCPU µs/call: client\thub\tupstream\thub allocs/call\thub KiB/call\t")
	for _, m := range rows {
		ratio, added := "-", "-"
		if d, ok := direct[key{m.target.rev, m.target.clientName(), m.sessions, m.target.baseline}]; ok && !m.target.direct && isEcho(m.target) {
			ratio = fmt.Sprintf("%.2f", m.rate()/d.rate())
			added = round(m.p50 - d.p50).String()
		}
		hubCPU, objs, kib := "-", "-", "-"
		if m.target.cpu.hub != 0 {
			hubCPU = perCall(m.cpu.hub, m.calls)
		}
		if m.allocs.ok {
			objs = perCallFloat(m.allocs.objects, m.calls)
			kib = fmt.Sprintf("%.1f", float64(m.allocs.bytes)/1024/float64(max(m.calls, 1)))
		}
		upstream := "-"
		if m.target.cpu.upstream != 0 {
			upstream = perCall(m.cpu.upstream, m.calls)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.target.path, m.target.rev, m.target.clientName(), m.sessions, m.rate(),
			round(m.p50), round(m.p99), m.failed, ratio, added, perCall(m.cpu.client, m.calls), hubCPU, upstream, objs, kib)
	}
	_ = w.Flush()
}

// isEcho tells the rows that call the echo tool (through the hub or the
// relay), the only ones a direct baseline exists for.
func isEcho(t target) bool {
	return t.tool == echoTool || t.tool == hubHTTPTool || t.tool == hubSessionTool || t.tool == hubStdioTool
}

func round(d time.Duration) time.Duration {
	neg := d < 0
	if neg {
		d = -d
	}
	switch {
	case d >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	default:
		d = d.Round(time.Microsecond)
	}
	if neg {
		return -d
	}
	return d
}
