package sandbox

import (
	"context"
	"strings"
	"testing"
)

// A run whose context ends is killed whole and says so.
func TestRunCancelledByItsContext(t *testing.T) {
	b := openBox(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// cancelled once the command says it is running
	res, err := b.run(ctx, []string{"sh", "-c", "echo running && exec sleep 600"}, nil, runOptions{raw: writerFunc(func([]byte) { cancel() })})
	if err != nil {
		t.Fatal(err)
	}
	if res.Killed != LimitCancelled || res.Exit != -1 || !strings.Contains(res.Why, "stopped because its run ended") {
		t.Fatalf("%+v", res)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
