package serve

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"syscall"
	"testing"
)

// Issue 37 (connections): the soft open-file limit is raised to the hard
// one, and the figure handed back is the one then in force.
func TestRaiseFileLimitRaisesTheSoftLimitToTheHard(t *testing.T) {
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
	lowered := was
	lowered.Cur = min(was.Max, 256)
	if lowered.Cur == was.Max {
		t.Fatalf("the hard open-file limit is %d: nothing to raise to", was.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	got, err := raiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != was.Max || got != now.Cur {
		t.Fatalf("after the raise the soft limit is %d (reported %d), want the hard %d", now.Cur, got, was.Max)
	}
}

// Issue 37 (connections): the default cap is three quarters of the
// open-file limit; an unknown limit leaves the fixed fallback.
func TestDefaultConnectionCapIsAShareOfTheFileLimit(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{1024, 768}, {20000, 15000}, {1 << 20, 786432}, {0, fallbackMaxConns}, {^uint64(0), fallbackMaxConns}} {
		if got := connCapFor(c.nofile); got != c.want {
			t.Errorf("connCapFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// Issue 37 (connections): with no --max-conns the hub logs at start the
// open-file limit (raised: to the hard one, or one below it where Go's
// runtime raised it) and the cap it gives, three quarters of it.
func TestServeLogsTheConnectionCapFromTheFileLimit(t *testing.T) {
	log := &syncBuffer{}
	env := func(k string) (string, bool) { return limitsToken, k == "CREWLET_OPERATOR_TOKEN" }
	_, _, stop := runUntilListening(t, Options{DataDir: t.TempDir(), LookupEnv: env, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines([]byte(log.String())) {
		var rec struct {
			Msg           string
			MaxConns      int    `json:"max_conns"`
			OpenFileLimit uint64 `json:"open_file_limit"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Msg != "connection_cap" {
			continue
		}
		if want := int(now.Cur / 4 * 3); rec.OpenFileLimit != now.Cur || now.Cur+1 < now.Max || rec.MaxConns != want {
			t.Fatalf("logged %s with the limit at %d of %d, want open_file_limit %d (the hard limit or one below) and max_conns %d",
				line, now.Cur, now.Max, now.Cur, want)
		}
		return
	}
	t.Fatalf("no connection_cap line in the log:\n%s", log)
}
