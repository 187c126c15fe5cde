package hub

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawSession opens a 2025 session with a raw client: initialize, then
// initialized. It answers the session id.
func rawSession(t *testing.T, url string) string {
	t.Helper()
	post := func(body, id string) *http.Response {
		req, _ := http.NewRequest("POST", url+"/operator/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer ci-token-123456")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	id := post(initBody, "").Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatal("initialize opened no session")
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id)
	return id
}

func openStream(t *testing.T, url, id string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/operator/mcp", nil)
	req.Header.Set("Authorization", "Bearer ci-token-123456")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, bufio.NewReader(resp.Body)
}

// readUntil reads the stream's lines until one holds want.
func readUntil(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- err
				return
			}
			if strings.Contains(line, want) {
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the stream ended before %q: %v", want, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q on the stream", want)
	}
}

// openStreamAgain opens the session's stream once the server has let the
// last one go: the SDK answers a second stream of a session with an error
// while the first is still open.
func openStreamAgain(t *testing.T, url, id string) (*http.Response, *bufio.Reader) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, br := openStream(t, url, id)
		if resp.StatusCode == http.StatusOK {
			return resp, br
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a new stream of the session is answered %s 10 s after the last one hung up", resp.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A 2025 session's event stream is served as the SDK serves it, by the
// HTTP server like every other request: the session's notifications on
// it; a client hanging up ends it and the session keeps going (a new
// stream may open); the session's end ends it.
func TestEventStreamOfASession(t *testing.T) {
	th := newTestHub(t)
	id := rawSession(t, th.url)

	resp, br := openStream(t, th.url, id)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache, no-transform" {
		t.Fatalf("stream answered %s, header %v", resp.Status, resp.Header)
	}
	readUntil(t, br, ": ok")

	// The session's notifications come on it.
	th.operator.server.RemoveTools("echo")
	readUntil(t, br, "notifications/tools/list_changed")

	// The client hangs up: the stream ends, the session stays, and a new
	// stream takes the old one's place.
	resp.Body.Close()
	resp, br = openStreamAgain(t, th.url, id)
	if th.operator.sessions.get(id) == nil {
		t.Fatal("hanging up the stream ended the session")
	}
	readUntil(t, br, ": ok")

	// The session ends (its client's DELETE): so does its stream.
	req, _ := http.NewRequest("DELETE", th.url+"/operator/mcp", nil)
	req.Header.Set("Authorization", "Bearer ci-token-123456")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	streamEnds(t, br, "the stream outlived its session")
	resp.Body.Close()
}

// A stream still open when the hub closes ends with it; nothing of it
// outlives the hub (the package's leak check).
func TestEventStreamEndsWithTheHub(t *testing.T) {
	th := newTestHub(t)
	id := rawSession(t, th.url)
	resp, br := openStream(t, th.url, id)
	defer resp.Body.Close()
	readUntil(t, br, ": ok")
	th.Close()
	streamEnds(t, br, "the stream outlived the hub")
}

// streamEnds waits for the stream to end.
func streamEnds(t *testing.T, br *bufio.Reader, why string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := br.ReadString(0)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}
