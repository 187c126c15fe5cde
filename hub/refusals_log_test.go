package hub

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
)

// Refused requests cost the log a bounded, sampled line each reason, and
// never carry the refused value, in the log or in the answer: a stranger
// who sends ten 900 KB Host or Origin headers, or a stream of bad tokens,
// adds a few hundred bytes to the log (issue 15, finding 7).
func TestRefusedRequestsAreLoggedSampledAndNeverEchoed(t *testing.T) {
	logs, logger := hubtest.NewLog(slog.LevelDebug)
	th := newTestHub(t, func(o *Options) { o.Logger = logger })
	var mu sync.Mutex
	now := time.Now()
	th.operator.refusals.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	before := logs.Len()

	huge := strings.Repeat("a", 900<<10)
	send := func(mutate func(*http.Request)) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", th.url+"/tools", nil)
		if err != nil {
			t.Fatal(err)
		}
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for range 10 {
		code, body := send(func(r *http.Request) { r.Host = huge + ".example" })
		if code != http.StatusForbidden || strings.Contains(body, "aaaaaaaa") || len(body) > 512 {
			t.Fatalf("bad Host: %d, %d bytes of body", code, len(body))
		}
		code, body = send(func(r *http.Request) { r.Header.Set("Origin", "https://"+huge+".example") })
		if code != http.StatusForbidden || strings.Contains(body, "aaaaaaaa") || len(body) > 512 {
			t.Fatalf("bad Origin: %d, %d bytes of body", code, len(body))
		}
		code, _ = send(func(r *http.Request) { r.Header.Set("Authorization", "Bearer not-a-token-"+huge[:64<<10]) })
		if code != http.StatusUnauthorized {
			t.Fatalf("bad token: %d", code)
		}
	}
	added := logs.String()[before:]
	if strings.Contains(added, "aaaaaaaa") || strings.Contains(added, "not-a-token") {
		t.Fatal("a refused value reached the log")
	}
	if len(added) > 2048 {
		t.Fatalf("thirty refused requests added %d bytes to the log:\n%s", len(added), added)
	}
	for _, reason := range []string{"host not allowed", "origin not allowed", "unknown or revoked token"} {
		if n := len(logs.Lines(reason)); n != 1 {
			t.Fatalf("%q logged %d times in one interval, want once:\n%s", reason, n, added)
		}
	}

	// An interval later the next refusal is logged, saying how many were
	// left out.
	mu.Lock()
	now = now.Add(refusalLogEvery)
	mu.Unlock()
	send(func(r *http.Request) { r.Host = "elsewhere.example" })
	if got := logs.Lines("host not allowed", `"suppressed_since_last":9`); len(got) != 1 {
		t.Fatalf("no line counting the suppressed refusals:\n%s", logs.String()[before:])
	}
}
