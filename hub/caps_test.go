package hub

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newCappedHub serves testCompany with api.limits set to limits (a YAML
// flow mapping) and, beside echo, a tool "hold" that answers only when the
// test calls release: each call is reported on entered as it starts. A
// test registers release as a cleanup after its clients, so that a
// client closed at the test's end is not left waiting for its call.
func newCappedHub(t *testing.T, limits string, change ...func(*Options)) (th *testHub, entered chan struct{}, release func()) {
	t.Helper()
	doc := testCompany + "  limits: " + limits + "\n"
	c, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	holder, entered, release := holderServer(t)
	th = newTestHub(t, func(o *Options) {
		o.Company = c
		o.Reload = func() (*config.Company, error) { return config.Parse([]byte(doc)) }
		o.FirstParty = append(o.FirstParty, holder)
		for _, ch := range change {
			ch(o)
		}
	})
	// Released before the hub closes, so no call is left holding it.
	t.Cleanup(release)
	return th, entered, release
}

// holderServer is a first-party server whose tool "hold" answers only
// when the test calls release; each call is reported on entered as it
// starts.
func holderServer(t *testing.T) (fp FirstParty, entered chan struct{}, release func()) {
	t.Helper()
	entered = make(chan struct{}, 64)
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	hold := servers.Typed("hold", "Answer once the test releases the call.", servers.Hints{ReadOnly: servers.Yes}, "",
		func(ctx context.Context, _ authority.Caller, _ struct{}) (struct {
			Released bool `json:"released"`
		}, error) {
			entered <- struct{}{}
			select {
			case <-released:
			case <-ctx.Done():
			}
			return struct {
				Released bool `json:"released"`
			}{true}, nil
		})
	fp = FirstParty{Name: "holder", New: func(tr servers.Trust, _ Deps) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "holder", Version: "0"}, nil)
		servers.Register(s, tr, nil, hold)
		return s
	}}
	return fp, entered, release
}

// started waits for a call of hold to start (a hang detector bounds it).
func started(t *testing.T, entered <-chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a call of hold did not start within 10 s")
	}
}

// rawMCP sends one request to /operator/mcp as token, on session (""
// for none), and returns the answer with its body read.
func rawMCP(t *testing.T, th *testHub, method, token, session, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, th.url+"/operator/mcp", rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodGet && resp.StatusCode == http.StatusOK {
		// An event stream: the test reads only its head, and ends it
		// by closing the body.
		t.Cleanup(func() { resp.Body.Close() })
		return resp, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// refused429 checks an answer past a cap: 429 at once, Retry-After in
// whole seconds, and a sentence naming the cap's number and its key.
func refused429(t *testing.T, what string, resp *http.Response, body string, n int, key string) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("%s: %s %q, want 429", what, resp.Status, body)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s <= 0 {
		t.Fatalf("%s: Retry-After %q, want whole seconds", what, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(body, " "+strconv.Itoa(n)+" ") || !strings.Contains(body, "api.limits."+key) {
		t.Fatalf("%s: %q names neither the cap (%d) nor api.limits.%s", what, body, n, key)
	}
}

// echoAnswers checks that a call of echo on cs is answered, not refused.
func echoAnswers(t *testing.T, who string, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("%s: echo was not answered: %v %+v", who, err, res)
	}
}

// Issue 37 (caps per credential): a credential at its sessions is refused
// a new one 429 at once, in words naming the cap and the key that raises
// it, while another credential opens sessions and calls, and its own
// 2026-07-28 client (no session) calls too; a session the client ends
// gives its slot back.
func TestSessionCapPerCredential(t *testing.T) {
	logs, logger := hubtest.NewLog(slog.LevelInfo)
	th, _, _ := newCappedHub(t, "{sessions_per_credential: 2}", func(o *Options) { o.Logger = logger })
	ci := hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2025-11-25")
	hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2025-11-25")

	resp, body := rawMCP(t, th, http.MethodPost, ciToken, "", initBody)
	refused429(t, "a third session of ci", resp, body, 2, "sessions_per_credential")
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		t.Fatalf("the refused initialize opened session %s", id)
	}
	// The operator is told who met which cap.
	if len(logs.Lines(`"credential_cap_reached"`, `"api.limits.sessions_per_credential"`, `"credential":"ci"`)) != 1 {
		t.Fatalf("no credential_cap_reached line for ci's sessions:\n%s", logs.String())
	}

	// Another credential is not held by ci's cap: it opens as many as ci
	// holds, and its calls answer.
	for range 2 {
		echoAnswers(t, "ada beside ci at its cap", hubtest.Connect(t, th.url+"/operator/mcp", adaToken, "2025-11-25"))
	}
	// ci's own sessions go on working at the cap, and so does a
	// 2026-07-28 client of ci's, which opens no session.
	echoAnswers(t, "ci's session at the cap", ci)
	echoAnswers(t, "ci's 2026-07-28 client at the cap", hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2026-07-28"))

	// Ending one (the client's DELETE) frees its slot at once.
	if err := ci.Close(); err != nil {
		t.Fatal(err)
	}
	echoAnswers(t, "ci's session opened after one ended", hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2025-11-25"))
	// And the cap holds again.
	resp, body = rawMCP(t, th, http.MethodPost, ciToken, "", initBody)
	refused429(t, "ci at its cap again", resp, body, 2, "sessions_per_credential")
}

// openSession opens a 2025 session by hand (initialize and the
// initialized notification) and returns its id.
func openSession(t *testing.T, th *testHub, token string) string {
	t.Helper()
	resp, body := rawMCP(t, th, http.MethodPost, token, "", initBody)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %s %q", resp.Status, body)
	}
	if resp, body := rawMCP(t, th, http.MethodPost, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s %q", resp.Status, body)
	}
	return id
}

// Issue 37 (caps per credential): a credential at its event streams is
// refused one more 429 at once, while another credential opens its
// stream and calls; a stream that ends gives its slot back.
func TestStreamCapPerCredential(t *testing.T) {
	th, _, _ := newCappedHub(t, "{streams_per_credential: 1}")
	first, second := openSession(t, th, ciToken), openSession(t, th, ciToken)
	held, _ := rawMCP(t, th, http.MethodGet, ciToken, first, "")
	if held.StatusCode != http.StatusOK {
		t.Fatalf("ci's first stream: %s", held.Status)
	}

	resp, body := rawMCP(t, th, http.MethodGet, ciToken, second, "")
	refused429(t, "ci's second stream", resp, body, 1, "streams_per_credential")

	// ada's stream opens and its calls answer, ci's stream open beside.
	ada := openSession(t, th, adaToken)
	if resp, _ := rawMCP(t, th, http.MethodGet, adaToken, ada, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("ada's stream beside ci at its cap: %s", resp.Status)
	}
	echoAnswers(t, "ada beside ci at its cap", hubtest.Connect(t, th.url+"/operator/mcp", adaToken, "2025-11-25"))

	// The stream ends (its client hangs up): ci may open another.
	held.Body.Close()
	eventually(t, 10*time.Second, "ci's slot given back once its stream ended", func() (bool, string) {
		n := th.operator.caps.streams.held("ci")
		return n == 0, strconv.Itoa(n) + " held"
	})
	if resp, body := rawMCP(t, th, http.MethodGet, ciToken, second, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("ci's stream after the first ended: %s %q", resp.Status, body)
	}
}

// Issue 37 (caps per credential): one session's calls in flight are
// capped: past calls_per_session a call is refused unavailable, not made,
// in words naming the cap; the same credential's other session and
// another credential call on; a call that answers frees its place. On
// both of the hub's paths for a 2025 call (its own and the SDK's).
func TestCallsInFlightPerSessionAreCapped(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "sdk"}[sdk], func(t *testing.T) {
			th, entered, release := newCappedHub(t, "{calls_per_session: 1}")
			th.operator.noFast.Store(sdk)
			ci := hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2025-11-25")
			t.Cleanup(release)
			held := make(chan error, 1)
			go func() {
				res, err := ci.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold"})
				if err == nil && res.IsError {
					err = io.ErrUnexpectedEOF
				}
				held <- err
			}()
			started(t, entered)

			res, err := ci.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil {
				t.Fatalf("the call past the cap: %v, want a refused call", err)
			}
			class, _ := servers.ClassOf(res)
			text := hubtest.Text(res)
			if class != authority.Unavailable || !strings.Contains(text, " 1 tool calls in flight") ||
				!strings.Contains(text, "api.limits.calls_per_session") || !strings.Contains(text, "not made") {
				t.Fatalf("the call past the cap: class %q, %q", class, text)
			}

			echoAnswers(t, "ci's other session", hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2025-11-25"))
			echoAnswers(t, "ada", hubtest.Connect(t, th.url+"/operator/mcp", adaToken, "2025-11-25"))

			release()
			if err := <-held; err != nil {
				t.Fatalf("the held call: %v", err)
			}
			echoAnswers(t, "ci's session once its call answered", ci)
			if fast := th.operator.fastCalls.Load(); sdk != (fast == 0) {
				t.Fatalf("%d calls answered on the fast path, want them on the %s path", fast, map[bool]string{false: "fast", true: "SDK's"}[sdk])
			}
		})
	}
}

// Issue 37 (caps per credential): a credential's calls in flight are
// capped over all its sessions and its 2026-07-28 requests, which have no
// session: past calls_per_credential a call is refused unavailable, not
// made, while another credential calls on.
func TestCallsInFlightPerCredentialAreCapped(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			th, entered, release := newCappedHub(t, "{calls_per_credential: 2, calls_per_session: 1}")
			held := make(chan error, 2)
			for range 2 {
				cs := hubtest.Connect(t, th.url+"/operator/mcp", ciToken, version)
				t.Cleanup(release)
				go func() {
					_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold"})
					held <- err
				}()
			}
			started(t, entered)
			started(t, entered)

			ci := hubtest.Connect(t, th.url+"/operator/mcp", ciToken, version)
			res, err := ci.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil {
				t.Fatalf("the call past the cap: %v, want a refused call", err)
			}
			class, _ := servers.ClassOf(res)
			if text := hubtest.Text(res); class != authority.Unavailable || !strings.Contains(text, "Credential ci has 2 tool calls in flight") ||
				!strings.Contains(text, "api.limits.calls_per_credential") {
				t.Fatalf("the call past the cap: class %q, %q", class, text)
			}
			echoAnswers(t, "ada beside ci at its cap", hubtest.Connect(t, th.url+"/operator/mcp", adaToken, version))

			release()
			for range 2 {
				if err := <-held; err != nil {
					t.Fatalf("a held call: %v", err)
				}
			}
			eventually(t, 10*time.Second, "ci's calls given back", func() (bool, string) {
				n := th.operator.caps.calls.held("ci")
				return n == 0, strconv.Itoa(n) + " held"
			})
			echoAnswers(t, "ci once its calls answered", ci)
		})
	}
}

// Issue 37 (caps per credential): a credential's requests in service are
// capped, whatever they are (each holds a connection): with two calls of
// ci held, a third request of ci, here GET /tools, is answered 429 at
// once, while ada's is answered; once the calls answer, ci's is too.
func TestRequestsInServicePerCredentialAreCapped(t *testing.T) {
	th, entered, release := newCappedHub(t, "{requests_per_credential: 2}")
	held := make(chan error, 2)
	// 2026-07-28: no session, so once connected the calls' POSTs are all
	// ci holds.
	var clients []*mcp.ClientSession
	for range 2 {
		clients = append(clients, hubtest.Connect(t, th.url+"/operator/mcp", ciToken, "2026-07-28"))
	}
	t.Cleanup(release)
	// A request's slot is given back as its handler returns, which may
	// be just after the client read its answer: the calls start from
	// none held, or the connects' tails would take one of their slots.
	eventually(t, 10*time.Second, "ci's connects given back", func() (bool, string) {
		n := th.operator.caps.requests.held("ci")
		return n == 0, strconv.Itoa(n) + " held"
	})
	for _, cs := range clients {
		go func() {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold"})
			held <- err
		}()
	}
	started(t, entered)
	started(t, entered)

	tools := func(token string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, th.url+"/tools", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := tools(ciToken)
	refused429(t, "ci's third request", resp, body, 2, "requests_per_credential")
	if resp, body := tools(adaToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("ada's request beside ci at its cap: %s %q", resp.Status, body)
	}

	release()
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("a held call: %v", err)
		}
	}
	eventually(t, 10*time.Second, "ci's requests given back", func() (bool, string) {
		n := th.operator.caps.requests.held("ci")
		return n == 0, strconv.Itoa(n) + " held"
	})
	if resp, body := tools(ciToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("ci's request once its calls answered: %s %q", resp.Status, body)
	}
}
