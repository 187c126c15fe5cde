package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 15, finding 3: a reload that would lock everyone out is refused
// with a sentence and the revision in force stays, credentials, servers
// and all: an empty file (an editor still saving it), one whose only
// administrator credential was removed, and one cut short before its
// credentials (which would trade them for the generated one).
func TestReloadThatWouldLockEveryoneOutIsRefused(t *testing.T) {
	up := hubtest.Upstream(t, &mcp.Tool{Name: "echo_up"})
	servers := fmt.Sprintf("mcp_servers:\n  - {name: up, url: %q}\n", up)
	var mu sync.Mutex
	next := testCompany + servers
	th := newTestHub(t, withServers(t, fmt.Sprintf(`{name: up, url: %q}`, up)), func(o *Options) {
		o.Reload = func() (*config.Company, error) {
			mu.Lock()
			defer mu.Unlock()
			return config.Parse([]byte(next))
		}
	})
	units, _, _ := strings.Cut(testCompany, "api:")
	for name, doc := range map[string]string{
		"empty":          "",
		"comments only":  "# being written\n",
		"admin removed":  strings.Replace(testCompany, `      - {id: laptop, token: "${ADA_TOKEN}", seat: ada}`+"\n", "", 1) + servers,
		"cut before api": units,
	} {
		mu.Lock()
		next = doc
		mu.Unlock()
		req, _ := http.NewRequest("POST", th.url+"/config/reload", nil)
		req.Header.Set("Authorization", "Bearer ada-token-123456")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"class": "invalid"`) {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
		}
		// The administrator's token still works, and so does the server.
		cs := hubtest.Connect(t, th.url+"/operator/mcp", "ada-token-123456", "2026-07-28")
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo_up", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("%s: after the refused reload: %v %s", name, err, hubtest.Text(res))
		}
	}
	// A sound revision still applies.
	mu.Lock()
	next = testCompany + servers
	mu.Unlock()
	if err := th.Reload(); err != nil {
		t.Fatal(err)
	}
}
