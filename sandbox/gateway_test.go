package sandbox

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
