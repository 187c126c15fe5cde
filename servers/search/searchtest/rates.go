package searchtest

import (
	"context"
	"testing"
	"time"
)

// Follower is an index that follows a node's log: a search.Index.
type Follower interface {
	WaitFor(ctx context.Context, pos uint64) error
}

// ReportWriteRates reports two rates for the b.N writes a benchmark began
// at start and has just seen answered: writes answered per second (as
// unit), and writes searchable per second, which also counts the index
// catching up to pos, the log position after the last write. An index
// that falls behind the writes shows as the gap between the two.
func ReportWriteRates(b *testing.B, start time.Time, unit string, pos uint64, ix Follower) {
	b.Helper()
	answered := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := ix.WaitFor(ctx, pos); err != nil {
		b.Fatal(err)
	}
	searchable := time.Since(start)
	b.ReportMetric(float64(b.N)/answered.Seconds(), unit)
	b.ReportMetric(float64(b.N)/searchable.Seconds(), "searchable/s")
}
