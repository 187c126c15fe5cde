package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// The gateway sends on only the model calls a coding CLI makes (a chat
// completion, a response, the model listing), with the provider's key in
// place of the box's placeholder and none of the box's other headers (an
// organization or project would spend the key on an account the box
// names). Every other path or method — the key's files, fine-tuning jobs —
// is answered by the gateway itself in words, never sent on with the key.
func TestGatewayForwardsOnlyTheModelAPI(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	provider := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var names []string
		for k := range r.Header {
			if k != "Accept-Encoding" && k != "Content-Length" { // the hub's own transport's
				names = append(names, k)
			}
		}
		slices.Sort(names)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+strings.Join(names, ","))
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
	var metered []int
	if err := b.ServeModel(Provider{BaseURL: "http://" + ln.Addr().String() + "/api/v1/",
		Header: http.Header{"Authorization": {"Bearer sk-provider"}},
		Meter: func(n int) (func(ModelCall), error) {
			mu.Lock()
			defer mu.Unlock()
			metered = append(metered, n)
			return func(ModelCall) {}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	client := gatewayClient(b)
	call := func(method, p string) (int, string) {
		req, _ := http.NewRequest(method, "http://box"+p, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer placeholder")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("OpenAI-Organization", "org-other")
		req.Header.Set("OpenAI-Project", "proj-other")
		req.Header.Set("Cookie", "session=other")
		req.Header.Set("X-Anything", "else")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range [][2]string{{"POST", "/v1/chat/completions"}, {"POST", "/v1/responses"}, {"GET", "/v1/models"}} {
		if code, body := call(c[0], c[1]); code != 200 || body != "from the provider" {
			t.Fatalf("%s %s: %d %q", c[0], c[1], code, body)
		}
	}
	for _, c := range []struct{ method, path, says string }{
		{"GET", "/v1/files", "/v1/files is not one of them"},
		{"DELETE", "/v1/files/file-abc", "/v1/files/file-abc is not one of them"},
		{"POST", "/v1/fine_tuning/jobs", "/v1/fine_tuning/jobs is not one of them"},
		{"POST", "/admin", "sends on only the model's calls (GET /v1/models, POST /v1/chat/completions, POST /v1/responses)"},
		{"POST", "/v1/../v1/chat/completions", "is not one of them"},
		{"POST", "/v2/chat", "is not one of them"},
		{"GET", "/v1/chat/completions", "sends /v1/chat/completions on only as POST, not GET"},
		{"DELETE", "/v1/models", "only as GET, not DELETE"},
	} {
		code, body := call(c.method, c.path)
		if want := map[bool]int{true: http.StatusMethodNotAllowed, false: http.StatusNotFound}[strings.Contains(c.says, "only as")]; code != want || !strings.Contains(body, c.says) {
			t.Fatalf("%s %s: %d %q, want %d saying %q", c.method, c.path, code, body, want, c.says)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	const headers = " Bearer sk-provider Accept,Authorization,Content-Type"
	want := []string{"POST /api/v1/chat/completions" + headers, "POST /api/v1/responses" + headers, "GET /api/v1/models" + headers}
	if !slices.Equal(seen, want) {
		t.Fatalf("the provider saw\n%q\nwant\n%q", seen, want)
	}
	if len(metered) != 2 {
		t.Fatalf("the meter was asked %d times, want once for each completion and not for the listing", len(metered))
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
	client := gatewayClient(b)
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

// At most 4 model calls from one box are forwarded at once, each request
// at most 8 MiB, so a box holds at most 32 MiB of the hub's memory in
// requests: a fifth call while four are at the provider is answered 429 in
// words and never sent, and is sent once one has been answered; a request
// past 8 MiB is answered 413 in words and never sent.
func TestGatewayCapsCallsInFlightAndTheirSize(t *testing.T) {
	arrived := make(chan struct{}, maxModelCallsInFlight)
	release := make(chan struct{})
	var mu sync.Mutex
	sent := 0
	provider := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent++
		held := sent <= maxModelCallsInFlight
		mu.Unlock()
		// The first four are held until released; any later one is
		// answered at once.
		if held {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, `{"choices":[]}`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go provider.Serve(ln)
	defer provider.Close()

	b := openBox(t, Config{})
	if err := b.ServeModel(Provider{BaseURL: "http://" + ln.Addr().String() + "/v1",
		Meter: func(int) (func(ModelCall), error) { return func(ModelCall) {}, nil }}); err != nil {
		t.Fatal(err)
	}
	client := gatewayClient(b)
	post := func(body string) (int, string) {
		resp, err := client.Post("http://box/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	var wg sync.WaitGroup
	for range maxModelCallsInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := post(`{"model":"m"}`); code != 200 {
				t.Errorf("a call within the cap: %d %s", code, body)
			}
		}()
	}
	for range maxModelCallsInFlight {
		<-arrived
	}
	code, body := post(`{"model":"m"}`)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "already forwards 4 model calls from this box, as many as it forwards at once") {
		t.Fatalf("a fifth call in flight: %d %s", code, body)
	}
	close(release)
	wg.Wait()
	// The four are answered; the gateway counts them out as their
	// handlers return.
	b.gateway.mu.Lock()
	for b.gateway.inflight > 0 {
		b.gateway.idle.Wait()
	}
	b.gateway.mu.Unlock()
	if code, body := post(`{"model":"m"}`); code != 200 {
		t.Fatalf("a call once the four were answered: %d %s", code, body)
	}

	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 8<<20) + `"}]}`
	if code, body := post(big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "past the 8 MiB the gateway sends on") {
		t.Fatalf("a request past 8 MiB: %d %.200s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if sent != maxModelCallsInFlight+1 {
		t.Fatalf("the provider saw %d calls, want the four and the one after them", sent)
	}
}

// gatewayClient reaches b's model gateway as the box does, through its
// unix socket.
func gatewayClient(b *Box) *http.Client {
	sock := filepath.Join(b.gateway.dir, "model.sock")
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}
