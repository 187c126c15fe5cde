package hub

import (
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
)

// A stranger can fail TLS handshakes as fast as they like: a real TLS
// server on loopback, sent plain HTTP, logs tls_handshake_failed once per
// interval as a JSON line, the next line counting those left out.
func TestTLSHandshakeFailuresAreLoggedSampled(t *testing.T) {
	logs, logger := hubtest.NewLog(slog.LevelDebug)
	var mu sync.Mutex
	now := time.Now()
	r := newRefusalLog(logger, refusalLogEvery)
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(serverErrors{r}, "", 0)
	srv.StartTLS()
	defer srv.Close()
	plain := strings.Replace(srv.URL, "https://", "http://", 1)

	send := func() {
		t.Helper()
		resp, err := http.Get(plain)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS port: %s", resp.Status)
		}
	}
	lines := func() []string { return logs.Lines(`"msg":"tls_handshake_failed"`) }
	// The server logs after it has answered: wait for what it has to say.
	await := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s within 10 s; the log:\n%s", what, logs.String())
			}
		}
	}
	suppressed := func() int { r.mu.Lock(); defer r.mu.Unlock(); return r.suppressed["tls handshake failed"] }

	send()
	await("one line", func() bool { return len(lines()) == 1 })
	send()
	send()
	await("two left out", func() bool { return suppressed() == 2 })
	if n := len(lines()); n != 1 {
		t.Fatalf("%d lines within the interval, want 1", n)
	}
	mu.Lock()
	now = now.Add(refusalLogEvery)
	mu.Unlock()
	send()
	await("a second line", func() bool { return len(lines()) == 2 })
	if l := lines()[1]; !strings.Contains(l, `"suppressed_since_last":2`) || !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, `"remote":"127.0.0.1:`) {
		t.Fatalf("the second line: %s", l)
	}
}
