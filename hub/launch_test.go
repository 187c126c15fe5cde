package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP-12: GET /mcp-servers and a server's page show each launch with its
// ${VAR} references as written and no literal that could be a credential:
// not a URL's userinfo or query values (in url or in an argument), not the
// literal text beside a reference. Nor does the hub's log say them.
func TestLaunchShowsNoLiteralCredential(t *testing.T) {
	up := strings.TrimPrefix(hubtest.Upstream(t, &mcp.Tool{Name: "search"}), "http://")
	literals := []string{"url-user-7781", "url-pass-7781", "query-key-7781", "sk-live-7781", "arg-pass-7781", "dead-pass-7781"}
	c := hubtest.NewCompany().Person("ada", true).Token("laptop", "ADA_TOKEN", "ada").
		Server(fmt.Sprintf(`{name: docs, url: "http://url-user-7781:url-pass-7781@%s?api_key=query-key-7781&mode=${MODE}", headers: {Authorization: "Bearer ${DOCS_TOKEN}", X-Key: "sk-live-7781${DOCS_TOKEN}"}}`, up)).
		Server(`{name: dead, url: "http://admin:dead-pass-7781@127.0.0.1:1/mcp?token=query-key-7781"}`).
		Server(`{name: remote, command: /nonexistent/bin/mcp-remote, args: ["https://me:arg-pass-7781@example.com/mcp"], env: {KEY: "sk-live-7781${DOCS_TOKEN}"}}`).
		Parse(t)
	logs, logger := hubtest.NewLog(slog.LevelDebug)
	env := hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456", "DOCS_TOKEN": "docs-token-123456", "MODE": "fast"})
	h, err := New(context.Background(), Options{Company: c, Env: env.Lookup, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	base := hubtest.Serve(t, h.Handler())

	var body struct {
		Servers []serverRow `json:"servers"`
	}
	if code := getJSON(t, base+"/mcp-servers", "ada-token-123456", &body); code != http.StatusOK || len(body.Servers) != 3 {
		t.Fatalf("GET /mcp-servers: %d %+v", code, body)
	}
	docs := body.Servers[0]
	if docs.State != rowRunning {
		t.Fatalf("docs %+v, want Running (the masked URL is only how it is shown)", docs)
	}
	wantURL := fmt.Sprintf("http://(literal, 13 characters):(literal, 13 characters)@%s?api_key=(literal, 14 characters)&mode=${MODE}", up)
	if docs.Launch.URL != wantURL {
		t.Errorf("docs url\n got %s\nwant %s", docs.Launch.URL, wantURL)
	}
	if h := docs.Launch.Headers; h["Authorization"] != "Bearer ${DOCS_TOKEN}" || h["X-Key"] != "(literal, 12 characters)${DOCS_TOKEN}" {
		t.Errorf("docs headers %v", h)
	}
	if a := body.Servers[2].Launch.Args; len(a) != 1 || a[0] != "https://(literal, 2 characters):(literal, 13 characters)@example.com/mcp" {
		t.Errorf("remote args %q", a)
	}

	for _, path := range []string{"/mcp-servers", "/mcp-servers/docs", "/mcp-servers/dead", "/mcp-servers/remote"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		resp, err := hubtest.Client("ada-token-123456").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, lit := range literals {
			if strings.Contains(string(raw), lit) {
				t.Errorf("GET %s shows %q:\n%s", path, lit, raw)
			}
		}
	}
	_ = h.Close()
	for _, lit := range literals {
		if strings.Contains(logs.String(), lit) {
			t.Errorf("the log says %q:\n%s", lit, logs.String())
		}
	}
}
