package knowledge

import (
	"fmt"
	"testing"

	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/servers/state/statetest"
)

// BenchmarkWritePage measures durable page writes per second through the
// tool (MCP call, checks, log append fsynced, projection, ledger) with the
// search index following the log, at 16 and 64 callers. Two rates are
// reported: pages answered applied, and pages searchable, which counts the
// index catching up after the last write.
func BenchmarkWritePage(b *testing.B) {
	for _, callers := range []int{16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			h := newHarness(b)
			start := statetest.RunWriters(b, callers, func(i int64) error {
				h.OK(ada, "write_page", map[string]any{"title": fmt.Sprintf("Runbook %d", i),
					"body": fmt.Sprintf("How to restart the %d-th replica of the ledger when its disk fills.", i)})
				return nil
			})
			searchtest.ReportWriteRates(b, start, "pages/s", h.node.Position(), h.ix)
		})
	}
}
