package hub

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// lockedBuffer is a log a fan-out's branches write concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// A branch that panics is caught and reported with what the fan-out was
// doing and its stack; every other branch still runs, and every goroutine
// has ended when fanOut returns (the package's goleak check sees to it).
func TestFanOutCatchesAPanickingBranch(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var ran atomic.Int32
	tasks := []func(){}
	for n := range 40 {
		tasks = append(tasks, func() {
			if n == 7 {
				panic("branch seven broke")
			}
			ran.Add(1)
		})
	}
	fanOut(log, "stop servers", tasks...)
	if ran.Load() != 39 {
		t.Fatalf("%d of 39 healthy branches ran", ran.Load())
	}
	out := logs.b.String()
	if strings.Count(out, `"msg":"fan_out_panic"`) != 1 || !strings.Contains(out, `"what":"stop servers"`) ||
		!strings.Contains(out, "branch seven broke") || !strings.Contains(out, "fanout_test.go") {
		t.Fatalf("the panic was not reported with its stack:\n%s", out)
	}
	fanOut(log, "nothing") // no tasks: returns at once
}
