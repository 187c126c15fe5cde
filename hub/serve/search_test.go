package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers/search/searchtest"
	"github.com/crewlet/hub/tracker-mcp"
)

// A company that names an embeddings model gets search by meaning on
// search_work_items, its index under DATA/state/search; the provider's key
// is sent to the provider and to nobody else: not in a result, not in the
// log, not even when the provider fails (OUT-1).
func TestRunSearchWithTheCompanysEmbeddingsModel(t *testing.T) {
	p := searchtest.NewProvider(t)
	const key = "sk-local-0123456789abcdef"
	doc := fmt.Sprintf(`units:
  - {id: core, name: Core, project: CORE, lead: ada, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
providers:
  local: {api: openai, base_url: %q, api_key: "${LOCAL_API_KEY}"}
models:
  embeddings: {provider: local, model: %s, max_input_tokens: 512}
`, p.BaseURL(), searchtest.Model)
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-0123456789abcdef", "LOCAL_API_KEY": key})
	logs := &syncBuffer{}
	dir := t.TempDir()
	base, _, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: dir, LookupEnv: env.Lookup,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	cs := hubtest.Connect(t, base+"/operator/mcp", "ada-token-0123456789abcdef", "")
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tool, err, hubtest.Text(res))
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		if strings.Contains(hubtest.Text(res)+string(b), key) {
			t.Fatalf("%s answered the provider's key", tool)
		}
		return out
	}
	call("create_work_item", map[string]any{"title": "My automobile will not start"})
	call("create_work_item", map[string]any{"title": "Car park closed"})
	// Vectors are made behind the write: wait, with a deadline, until the
	// items rank by meaning.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := call("search_work_items", map[string]any{"query": "car"})
		if out["mode"] == "hybrid" && out["note"] == nil {
			items := out["items"].([]any)
			if len(items) != 2 || items[0].(map[string]any)["key"] != "CORE-2" || items[1].(map[string]any)["key"] != "CORE-1" {
				t.Fatalf("hybrid: %v", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("search never ranked by meaning: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "search", tracker.SearchKind)); err != nil {
		t.Fatalf("no index under the data directory: %v", err)
	}
	for _, a := range p.Authorizations() {
		if a != "Bearer "+key {
			t.Fatalf("the provider was sent %q", a)
		}
	}
	p.SetDown(true)
	out := call("search_work_items", map[string]any{"query": "car"})
	if out["mode"] != "keyword" || !strings.Contains(out["degraded"].(string), "embeddings provider") {
		t.Fatalf("with the provider failing: %v", out)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), key) {
		t.Fatal("the provider's key is in the log")
	}
	if !strings.Contains(logs.String(), "search_embeddings") {
		t.Fatalf("the log does not say which model search uses:\n%s", logs.String())
	}

	// Without the key here, config check says search waits for it, and
	// fails naming it (issue 29): a hub started here would rank by
	// keyword only.
	var stdout, stderr bytes.Buffer
	if code := CheckFile(&stdout, &stderr, cfg, t.TempDir(), func(string) (string, bool) { return "", false }); code != 1 ||
		!strings.Contains(stdout.String(), "keyword and meaning (bag-of-concepts) once its provider's variables are set") ||
		!strings.Contains(stderr.String(), "${LOCAL_API_KEY}") || !strings.Contains(stderr.String(), "search would rank by keyword only") {
		t.Fatalf("config check: %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

// A reload that names another embeddings model switches search to it
// without a restart (issue 27): while the items are embedded again with
// the new model, search_work_items ranks by keyword and says so, and once
// they are, an item is found by meaning again. The new model's vectors
// are the old one's axes reversed, so the item a query shares only its
// meaning with is found first only if it was embedded again.
func TestReloadSwitchesTheEmbeddingsModel(t *testing.T) {
	p := searchtest.NewProvider(t)
	company := func(model string) []byte {
		return fmt.Appendf(nil, `units:
  - {id: core, name: Core, project: CORE, lead: ada, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}
api: {auth: {tokens: [{id: laptop, token: "${ADA_TOKEN}", seat: ada}]}}
providers:
  local: {api: openai, base_url: %q}
models:
  embeddings: {provider: local, model: %s, max_input_tokens: 512}
`, p.BaseURL(), model)
	}
	cfg := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(cfg, company(searchtest.Model), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "ada-token-0123456789abcdef"
	env := hubtest.NewEnv(map[string]string{"ADA_TOKEN": token})
	base, _, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: t.TempDir(), LookupEnv: env.Lookup})
	defer func() { _ = stop() }()
	cs := hubtest.Connect(t, base+"/operator/mcp", token, "")
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tool, err, hubtest.Text(res))
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return out
	}
	// first waits, with a deadline, until a search by meaning for car
	// answers with no sentence, and says which item it ranks first.
	first := func() string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out := call("search_work_items", map[string]any{"query": "car", "mode": "semantic"})
			if items, _ := out["items"].([]any); out["mode"] == "semantic" && out["degraded"] == nil && out["note"] == nil && len(items) > 0 {
				return items[0].(map[string]any)["key"].(string)
			}
			if time.Now().After(deadline) {
				t.Fatalf("search never ranked by meaning: %v", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	call("create_work_item", map[string]any{"title": "My automobile will not start"})
	call("create_work_item", map[string]any{"title": "Quarterly agenda"})
	call("create_work_item", map[string]any{"title": "Soup for the offsite"})
	if got := first(); got != "CORE-1" {
		t.Fatalf("before the change, meaning ranks %s first", got)
	}

	// The provider holds the new vectors back while the change is looked
	// at half done.
	p.SetDown(true)
	if err := os.WriteFile(cfg, company(searchtest.Reversed), 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/config/reload", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %d %s", resp.StatusCode, body)
	}
	out := call("search_work_items", map[string]any{"query": "automobile"})
	items, _ := out["items"].([]any)
	degraded, _ := out["degraded"].(string)
	if out["mode"] != "keyword" || len(items) != 1 || items[0].(map[string]any)["key"] != "CORE-1" ||
		!strings.Contains(degraded, "changed to "+searchtest.Reversed) || !strings.Contains(degraded, "keyword alone") {
		t.Fatalf("while the items are embedded again: %v", out)
	}

	p.SetDown(false)
	if got := first(); got != "CORE-1" {
		t.Fatalf("after the change, meaning ranks %s first", got)
	}
}
