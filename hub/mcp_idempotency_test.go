package hub

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyTransport sets an Idempotency-Key on every request a go-sdk client
// sends, as an MCP client that names its writes does.
type keyTransport struct {
	mu   sync.Mutex
	key  string
	base http.RoundTripper
}

func (k *keyTransport) set(key string) {
	k.mu.Lock()
	k.key = key
	k.mu.Unlock()
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	k.mu.Lock()
	key := k.key
	k.mu.Unlock()
	if key != "" {
		r = r.Clone(r.Context())
		r.Header.Set(IdempotencyKeyHeader, key)
	}
	return k.base.RoundTrip(r)
}

// Issue 36, finding 12 (OPS-6): a tools/call POSTed to /operator/mcp with
// an Idempotency-Key is a write named up front, as on /operator/act: sent
// again with the same call, the first answer comes back and nothing is
// written twice; another call under the same key is refused invalid and
// writes nothing; a key that cannot name an operation is refused before
// anything is called. On both revisions, on the fast path and the SDK's.
func TestMCPWriteNamedByIdempotencyKey(t *testing.T) {
	h := newOpsHub(t)
	ctx := context.Background()
	items := func(cs *mcp.ClientSession) int {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_work_items", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("list: %v %s", err, resultJSON(t, res))
		}
		list, _ := res.StructuredContent.(map[string]any)["items"].([]any)
		return len(list)
	}
	filed := 0
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		kt := &keyTransport{base: hubtest.Bearer{Token: adaToken}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "keyed", Version: "0"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: h.url + "/operator/mcp", HTTPClient: &http.Client{Transport: kt}},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		for _, fast := range []bool{true, false} {
			h.operator.noFast.Store(!fast)
			key := "mcp-" + version + "-" + map[bool]string{true: "fast", false: "sdk"}[fast]
			create := &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "Ship " + key}}
			kt.set(key)
			first, err := cs.CallTool(ctx, create)
			if err != nil || first.IsError {
				t.Fatalf("%s fast=%v: a keyed write: %v %s", version, fast, err, resultJSON(t, first))
			}
			again, err := cs.CallTool(ctx, create)
			if err != nil || resultJSON(t, again) != resultJSON(t, first) {
				t.Fatalf("%s fast=%v: the same call again answered\n%s\nnot\n%s (%v)", version, fast, resultJSON(t, again), resultJSON(t, first), err)
			}
			other, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "Something else"}})
			if err != nil || !other.IsError || other.Meta[servers.MetaRefusal] != string(authority.Invalid) || !strings.Contains(hubtest.Text(other), key) {
				t.Fatalf("%s fast=%v: another call under the key: %v %s", version, fast, err, resultJSON(t, other))
			}
			kt.set(strings.Repeat("k", maxActKey+1))
			long, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "Too long a key"}})
			if err != nil || !long.IsError || long.Meta[servers.MetaRefusal] != string(authority.Invalid) || !strings.Contains(hubtest.Text(long), IdempotencyKeyHeader) {
				t.Fatalf("%s fast=%v: a key past the bound: %v %s", version, fast, err, resultJSON(t, long))
			}
			kt.set("")
			filed++
			if n := items(cs); n != filed {
				t.Fatalf("%s fast=%v: %d items filed, want %d", version, fast, n, filed)
			}
		}
	}
	h.operator.noFast.Store(false)
}
