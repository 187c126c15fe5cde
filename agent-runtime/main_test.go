package agent

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/crewlet/hub/servers/search/searchtest"
)

// Every goroutine a test starts must be stopped by its owner before the
// package's tests end; the search the episodes are found through (bleve's
// process-wide analysis pool) is the one that lives as long as the binary.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, searchtest.LeakOptions()...)
}
