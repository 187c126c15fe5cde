package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// The TypeScript SDK client from npm against the hub.
func TestTypeScriptSDKClient(t *testing.T) {
	npmInstalled(t)
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	out := runTSClient(t, h.mcpURL(), h.token, []tsCall{
		{Name: "lookup_colleague", Arguments: map[string]any{"query": "Assistant"}},
		{Name: "lookup_colleague", Arguments: map[string]any{"query": "zzzzzzzzzzzz"}},
		{Name: "no_such_tool", Arguments: map[string]any{}},
	})
	if out.ServerInfo.Name != "crewlet" {
		t.Fatalf("server info %+v", out.ServerInfo)
	}
	if _, ok := out.Tool("lookup_colleague"); !ok {
		t.Fatalf("tools %v", out.ToolNames())
	}
	if len(out.Results) != 3 {
		t.Fatalf("results %+v", out.Results)
	}
	if r := out.Results[0]; r.Threw() || r.IsError {
		t.Fatalf("lookup_colleague(Assistant): %s", r.Raw)
	} else if a := decodeColleague(t, r.StructuredContent); a.Match == nil || a.Match.Handle != "assistant" || a.MatchedBy != "handle" {
		t.Fatalf("lookup_colleague(Assistant) = %+v", a)
	}
	for i, want := range []string{"not_found", "not_found"} {
		r := out.Results[i+1]
		var body struct {
			Class string `json:"class"`
		}
		_ = json.Unmarshal(r.StructuredContent, &body)
		if r.Threw() || !r.IsError || body.Class != want {
			t.Errorf("result %d: %s", i+1, r.Raw)
		}
	}
	// Without a token the TS client cannot connect: 401.
	if raw := runTSClientRaw(t, h.mcpURL(), "", nil); raw.ConnectError == "" || raw.Status != 401 {
		t.Fatalf("connect without a token: %+v", raw)
	}
}

// authProxy is a loopback proxy that adds the operator's bearer token, for
// clients that cannot send one (the conformance suite). It passes the Host
// header through untouched, so the hub's DNS-rebinding checks see exactly
// what the client sent, and streams responses as they come.
//
// It is full duplex: it flushes a streamed response's headers at once,
// while the request body may still be on its way to the server, and an
// HTTP/1 handler's request body otherwise closes once its response headers
// are flushed. The proxy's copy of the body then failed, the request to the
// server was cancelled and the response cut short ("ReverseProxy read error
// during body copy: use of closed network connection"): under load, now and
// then, a call's answer never reached the suite, which waited out its 60 s.
func authProxy(t testing.TB, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "e2e: proxy cannot be full duplex: "+err.Error(), http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The protocol's conformance suite against /operator/mcp.
func TestConformanceOperatorEndpoint(t *testing.T) {
	npmInstalled(t)
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	proxy := authProxy(t, h.baseURL(), h.token)
	scenarios := []string{"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}
	report := runConformance(t, proxy+"/operator/mcp", scenarios...)
	report.requirePassed(t, scenarios...)
	// Without the proxy's token the hub refuses the suite outright.
	resp, err := http.Post(h.mcpURL(), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("unauthenticated POST: %d", resp.StatusCode)
	}
}
