package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The hub's log is JSON lines, the server's own errors included: a failed
// TLS handshake (here a plain HTTP request to the HTTPS port) is the event
// tls_handshake_failed with the remote address and the cause, not the
// standard library's plain `http: TLS handshake error from …` line.
func TestTLSHandshakeErrorIsAJSONLine(t *testing.T) {
	// Whatever net/http would print on its own goes to the standard
	// logger; the test reads it too.
	var plain bytes.Buffer
	std := log.Writer()
	log.SetOutput(&plain)
	defer log.SetOutput(std)

	h := runTLS(t, HTTPLimits{})
	resp, err := http.Get(strings.Replace(h.base, "https://", "http://", 1) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the HTTPS port: %s, want 400", resp.Status)
	}

	var event map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for event == nil {
		for _, line := range strings.Split(h.log.String(), "\n") {
			if strings.Contains(line, "tls_handshake_failed") {
				if err := json.Unmarshal([]byte(line), &event); err != nil {
					t.Fatalf("not a JSON line: %q", line)
				}
			}
		}
		if event == nil && time.Now().After(deadline) {
			t.Fatalf("no tls_handshake_failed line within 10 s; the hub logged:\n%s\nthe standard logger:\n%s", h.log, plain.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	remote, _ := event["remote"].(string)
	cause, _ := event["error"].(string)
	if event["level"] != "WARN" || !strings.HasPrefix(remote, "127.0.0.1:") || !strings.Contains(cause, "HTTP request to an HTTPS server") {
		t.Fatalf("tls_handshake_failed: %v", event)
	}
	if strings.Contains(plain.String(), "TLS handshake error") {
		t.Fatalf("the standard logger printed a plain line:\n%s", plain.String())
	}
}
