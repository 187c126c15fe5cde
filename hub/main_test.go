package hub

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be stopped by its owner before the
// package's tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
