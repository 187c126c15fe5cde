package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// The gateway forwards the model's API, under /v1/, to the provider with
// the provider's key in place of the box's placeholder, and answers every
// other path itself, so the key is never sent with a request the model's
// API does not take.
func TestGatewayForwardsOnlyTheModelAPI(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	provider := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "from the provider")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go provider.Serve(ln)
	defer provider.Close()

	b := openBox(t, Config{})
	if err := b.ServeModel(Provider{BaseURL: "http://" + ln.Addr().String() + "/api/v1/",
		Header: http.Header{"Authorization": {"Bearer sk-provider"}}}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(b.gateway.dir, "model.sock")
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	get := func(p string) (int, string) {
		req, _ := http.NewRequest("POST", "http://box"+p, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer placeholder")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/v1/chat/completions"); code != 200 || body != "from the provider" {
		t.Fatalf("the model's API: %d %q", code, body)
	}
	for _, p := range []string{"/admin", "/v1/../admin", "/v2/chat"} {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404 from the gateway", p, code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "POST /api/v1/chat/completions Bearer sk-provider" {
		t.Fatalf("the provider saw %q", seen)
	}
}

// A model call through the gateway is told to the run's meter with what
// the provider reported it spent: a whole chat completion's usage, and a
// streamed one's, which the gateway asks for (stream_options.include_usage)
// when the client did not — the stand-in reports a stream's usage only
// when asked. A call the meter refuses is answered with its words and
// never sent.
func TestGatewayMetersEachModelCall(t *testing.T) {
	m := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Stream {
			return modeltest.Reply{Text: "streamed", Input: 300, Output: 40}
		}
		return modeltest.Reply{Text: "whole", Input: 120, Output: 7}
	})
	var mu sync.Mutex
	var sizes []int
	var calls []ModelCall
	refuse := false
	b := openBox(t, Config{})
	if err := b.ServeModel(Provider{BaseURL: m.OpenAIBase(), Meter: func(n int) (func(ModelCall), error) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return nil, errors.New("budget_exhausted: This seat's token budget has no room left")
		}
		sizes = append(sizes, n)
		return func(c ModelCall) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, c)
		}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(b.gateway.dir, "model.sock")
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(body string) (int, string) {
		resp, err := client.Post("http://box/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	whole := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	if code, body := post(whole); code != 200 || !strings.Contains(body, "whole") {
		t.Fatalf("a whole answer: %d %s", code, body)
	}
	if code, body := post(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`); code != 200 ||
		!strings.Contains(body, `"prompt_tokens":300`) || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
		t.Fatalf("a streamed answer, its usage passed on to the client: %d %s", code, body)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	code, body := post(whole)
	if code != http.StatusForbidden || !strings.Contains(body, "This seat's token budget has no room left") {
		t.Fatalf("a refused call: %d %s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[0] != len(whole) {
		t.Fatalf("the meter was asked with %v, want the first request's %d bytes", sizes, len(whole))
	}
	if len(calls) != 2 || calls[0].Status != 200 || calls[0].Input != 120 || calls[0].Output != 7 ||
		calls[1].Input != 300 || calls[1].Output != 40 || calls[1].Received == 0 || calls[0].Start.IsZero() {
		t.Fatalf("the meter was told %+v", calls)
	}
	if n := len(m.Requests()); n != 2 {
		t.Fatalf("the provider saw %d requests; the refused one was sent on", n)
	}
}
