package hub

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/crewlet/hub/servers/search/searchtest"
)

// Every goroutine a test starts must be stopped by its owner before the
// package's tests end. The tests link the tracker, and with it bleve's
// process-wide analysis pool, which no test owns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, searchtest.LeakOptions()...)
}
