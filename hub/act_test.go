package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// opsCompany is a company with a project and a space, two people, a seat
// and an unbound credential.
const opsCompany = `
units:
  - id: core
    name: Core
    project: CORE
    space: CORE
    lead: ada
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Grace, handle: grace, kind: human}
      - {name: Bot, handle: bot}
api:
  auth:
    tokens:
      - {id: laptop, token: "${ADA_TOKEN}", seat: ada}
      - {id: phone, token: "${GRACE_TOKEN}", seat: grace}
      - {id: ci, token: "${CI_TOKEN}"}
`

const (
	adaToken   = "ada-token-123456"
	graceToken = "grace-token-123456"
	ciToken    = "ci-token-123456"
)

type opsHub struct {
	*Hub
	url  string
	env  *hubtest.Env
	node *state.Node
}

// newOpsHub serves a hub running the native tracker and knowledge base
// over a state node of its own.
func newOpsHub(t *testing.T) *opsHub {
	t.Helper()
	projectors := append(tracker.Projectors(), knowledge.Projectors()...)
	node, err := state.Open(context.Background(), state.Options{Dir: filepath.Join(t.TempDir(), "state"), Projectors: projectors})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c, err := config.Parse([]byte(opsCompany))
	if err != nil {
		t.Fatal(err)
	}
	env := hubtest.NewEnv(map[string]string{"ADA_TOKEN": adaToken, "GRACE_TOKEN": graceToken, "CI_TOKEN": ciToken})
	h, err := New(context.Background(), Options{Company: c, Env: env.Lookup, MaxBodyBytes: 64 << 10,
		Reload: func() (*config.Company, error) { return config.Parse([]byte(opsCompany)) },
		FirstParty: []FirstParty{{Name: "tracker", New: func(tr servers.Trust, d Deps) *mcp.Server {
			return tracker.NewServer(tracker.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, tr)
		}}, {Name: "knowledge", New: func(tr servers.Trust, d Deps) *mcp.Server {
			return knowledge.NewServer(knowledge.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, tr)
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return &opsHub{Hub: h, url: hubtest.Serve(t, h.Handler()), env: env, node: node}
}

// act posts one call to /operator/act and answers the status and the
// decoded body.
func act(t *testing.T, url, token, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/operator/act", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(IdempotencyKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out
}

func actCall(tool string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"tool": tool, "arguments": args})
	return string(b)
}

// structured is a tool result's structured content, and its class when
// it is a refusal.
func structured(t *testing.T, res map[string]any) (map[string]any, authority.Class) {
	t.Helper()
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] == true {
		class, _ := sc["class"].(string)
		return sc, authority.Class(class)
	}
	return sc, ""
}

// OPS-2, OPS-6: /operator/act serves the operator catalogue; reads need no
// key, a write needs an Idempotency-Key, and the key names one operation
// of the credential that sent it.
func TestOperatorAct(t *testing.T) {
	h := newOpsHub(t)
	status, res := act(t, h.url, adaToken, "", actCall("list_projects", nil))
	if sc, class := structured(t, res); status != 200 || class != "" || sc["projects"] == nil {
		t.Fatalf("a read: %d %v", status, res)
	}

	create := actCall("create_work_item", map[string]any{"title": "Ship it"})
	status, res = act(t, h.url, adaToken, "", create)
	if status != 400 || res["error"] != "op_id_invalid" || res["header"] != IdempotencyKeyHeader || !strings.Contains(res["message"].(string), IdempotencyKeyHeader) {
		t.Fatalf("a write without a key: %d %v", status, res)
	}

	status, first := act(t, h.url, adaToken, "req-1", create)
	one, class := structured(t, first)
	if status != 200 || class != "" || one["key"] != "CORE-1" || one["op_id"] == "" {
		t.Fatalf("a keyed write: %d %v", status, first)
	}
	_, again := act(t, h.url, adaToken, "req-1", create)
	if !reflect.DeepEqual(again, first) {
		t.Fatalf("the same request again answered\n%v\nnot\n%v", again, first)
	}
	// Another principal's key is another operation.
	_, theirs := act(t, h.url, graceToken, "req-1", create)
	if sc, _ := structured(t, theirs); sc["key"] != "CORE-2" {
		t.Fatalf("the same key from grace: %v", theirs)
	}
	// The same key with another request is refused, writing nothing.
	_, other := act(t, h.url, adaToken, "req-1", actCall("create_work_item", map[string]any{"title": "Something else"}))
	if sc, class := structured(t, other); class != authority.Invalid || sc["data"].(map[string]any)["idempotency_key"] != "req-1" {
		t.Fatalf("the key with another request: %v", other)
	}
	// op_id beside the key.
	status, res = act(t, h.url, adaToken, "req-2", actCall("create_work_item", map[string]any{"title": "Ship it", "op_id": one["op_id"]}))
	if status != 400 || res["error"] != "op_id_invalid" {
		t.Fatalf("op_id beside the key: %d %v", status, res)
	}
	_, list := act(t, h.url, adaToken, "", actCall("list_work_items", nil))
	if sc, _ := structured(t, list); len(sc["items"].([]any)) != 2 {
		t.Fatalf("items filed: %v", sc["items"])
	}

	// What the catalogue refuses is a tool result, as over MCP.
	_, res = act(t, h.url, adaToken, "", actCall("no_such_tool", nil))
	if _, class := structured(t, res); class != authority.NotFound {
		t.Fatalf("an unknown tool: %v", res)
	}
	for name, body := range map[string]string{
		"not JSON":          `{"tool":`,
		"no tool":           `{"arguments":{}}`,
		"an unknown field":  `{"tool":"list_projects","args":{}}`,
		"arguments a list":  `{"tool":"list_projects","arguments":[]}`,
		"two values":        `{"tool":"list_projects"} {}`,
		"a tool with a tab": `{"tool":"list\tprojects"}`,
	} {
		if status, res := act(t, h.url, adaToken, "", body); status != 400 || res["error"] != "invalid_body" {
			t.Errorf("%s: %d %v", name, status, res)
		}
	}
	if status, res := act(t, h.url, adaToken, strings.Repeat("k", 256), create); status != 400 || res["error"] != "op_id_invalid" {
		t.Errorf("a long key: %d %v", status, res)
	}
	if status, _ := act(t, h.url, adaToken, "", `{"tool":"list_projects","arguments":{"pad":"`+strings.Repeat("x", 64<<10)+`"}}`); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body past the bound: %d", status)
	}

}

// OPS-1, OPS-6: a credential the company no longer holds is refused 401
// on /operator/act, whatever the call.
func TestOperatorActRevokedToken(t *testing.T) {
	h := newOpsHub(t)
	if status, _ := act(t, h.url, graceToken, "k", actCall("list_projects", nil)); status != 200 {
		t.Fatalf("before: %d", status)
	}
	h.env.Set("GRACE_TOKEN", "rotated-token-999999")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if status, _ := act(t, h.url, graceToken, "k", actCall("list_projects", nil)); status != http.StatusUnauthorized {
		t.Fatalf("after the revocation: %d", status)
	}
}

// scenario is one person's session with the operator catalogue, as calls.
var scenario = []struct {
	tool  string
	args  map[string]any
	class authority.Class // what it is refused as; "" for an answer
}{
	{"list_projects", nil, ""},
	{"create_work_item", map[string]any{"title": "Ship it", "assignee": "grace"}, ""},
	{"create_work_item", map[string]any{"title": "Test it"}, ""},
	{"comment_on_work_item", map[string]any{"key": "CORE-1", "body": "@grace when?"}, ""},
	{"update_work_item", map[string]any{"key": "CORE-1", "status": "in_progress"}, ""},
	{"move_on_board", map[string]any{"key": "CORE-2", "status": "in_progress", "before": "CORE-1"}, ""},
	{"save_view", map[string]any{"name": "Mine", "assignee": "me", "protected": true}, ""},
	{"list_views", nil, ""},
	{"pin_work_item", map[string]any{"key": "CORE-2"}, ""},
	{"list_inbox", nil, ""},
	{"order_my_queue", map[string]any{"keys": []string{}}, ""},
	{"get_work_item", map[string]any{"key": "CORE-1"}, ""},
	{"update_work_item", map[string]any{"key": "CORE-1", "title": "Ship it now", "if_match": 1}, authority.StaleVersion},
	{"order_my_queue", map[string]any{"keys": []string{"CORE-1"}}, authority.Invalid},
	{"delete_view", map[string]any{"name": "nothing"}, authority.NotFound},
	{"write_page", map[string]any{"title": "Runbook", "body": "Step one."}, ""},
	{"list_trash", nil, ""},
	{"restore_from_trash", map[string]any{"id": "pg_missing"}, authority.NotFound},
	{"no_such_tool", nil, authority.NotFound},
	{"list_activity", nil, ""},
}

// volatile are the answer fields that differ between two runs of the same
// calls whatever the transport: when, and the op_id (fresh on MCP, named
// by the key on /operator/act).
var volatile = regexp.MustCompile(`^(op_id|at|created_at|updated_at|pinned_at|id)$`)

// normal is an answer with its volatile fields blanked.
func normal(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			if volatile.MatchString(k) {
				out[k] = "*"
				continue
			}
			out[k] = normal(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normal(x)
		}
		return out
	}
	return v
}

// OPS-2: the same scenario through /operator/mcp and /operator/act gives
// the same answers: the same refusals, the same results, one catalogue.
func TestSameAnswersOverMCPAndAct(t *testing.T) {
	overMCP, overAct := newOpsHub(t), newOpsHub(t)
	cs := hubtest.Connect(t, overMCP.url+"/operator/mcp", adaToken, "")
	for i, step := range scenario {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: step.tool, Arguments: step.args})
		if err != nil {
			t.Fatalf("step %d %s over MCP: %v", i, step.tool, err)
		}
		b, _ := json.Marshal(res)
		var viaMCP map[string]any
		_ = json.Unmarshal(b, &viaMCP)
		status, viaAct := act(t, overAct.url, adaToken, fmt.Sprintf("step-%d", i), actCall(step.tool, step.args))
		if status != 200 {
			t.Fatalf("step %d %s over act: %d %v", i, step.tool, status, viaAct)
		}
		if _, class := structured(t, viaAct); class != step.class {
			t.Errorf("step %d %s answered class %q, want %q: %v", i, step.tool, class, step.class, viaAct)
		}
		for _, side := range []map[string]any{viaMCP, viaAct} {
			delete(side, "content") // the same JSON as structuredContent, as text
			delete(side, "_meta")
			// The MCP revision's own: a 2026-07-28 result's type, which
			// act's plain HTTP answer has no use for.
			delete(side, "resultType")
		}
		if a, b := normal(viaMCP), normal(viaAct); !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Errorf("step %d %s:\nMCP %s\nact %s", i, step.tool, ja, jb)
		}
	}
}

// OPS-4: history and activity show who wrote and the credential it came
// through, for writes through either transport.
func TestOperatorIDOverBothTransports(t *testing.T) {
	h := newOpsHub(t)
	cs := hubtest.Connect(t, h.url+"/operator/mcp", adaToken, "")
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_work_item", Arguments: map[string]any{"title": "Over MCP"}}); err != nil || res.IsError {
		t.Fatalf("over MCP: %v %v", err, res)
	}
	if _, res := act(t, h.url, ciToken, "k1", actCall("create_work_item", map[string]any{"title": "Over act", "project": "CORE"})); res["isError"] == true {
		t.Fatalf("over act: %v", res)
	}
	for key, want := range map[string][2]string{"CORE-1": {"ada", "laptop"}, "CORE-2": {"token:ci", "ci"}} {
		_, res := act(t, h.url, adaToken, "", actCall("get_work_item", map[string]any{"key": key}))
		sc, _ := structured(t, res)
		row := sc["item"].(map[string]any)["history"].([]any)[0].(map[string]any)
		if row["by"] != want[0] || row["operator_id"] != want[1] {
			t.Errorf("%s history: %v", key, row)
		}
		_, res = act(t, h.url, adaToken, "", actCall("list_activity", map[string]any{"item": key}))
		sc, _ = structured(t, res)
		feed := sc["activity"].([]any)[0].(map[string]any)
		if feed["actor"] != want[0] || feed["operator_id"] != want[1] {
			t.Errorf("%s activity: %v", key, feed)
		}
	}
}

// operatorTools are the eleven tools people reach on the operator surface
// and no seat is offered (OPS-3).
var operatorTools = []string{"list_views", "save_view", "delete_view", "write_work_catalogue", "order_my_queue",
	"list_inbox", "mark_inbox_read", "pin_work_item", "list_trash", "restore_from_trash", "move_on_board"}

// OPS-3, REF-5: a seat's registry holds none of the eleven and its call to
// any of them is refused forbidden before the tool runs; the operator
// catalogue holds them all.
func TestSeatsAreNeverOfferedOperatorTools(t *testing.T) {
	h := newOpsHub(t)
	var seat, operator []string
	for _, e := range h.SeatRegistry("bot").Entries() {
		seat = append(seat, e.Name)
	}
	for _, e := range CompanyRegistry(h.Catalogue()).Entries() {
		operator = append(operator, e.Name)
		if slices.Contains(operatorTools, e.Name) != e.OperatorOnly {
			t.Errorf("%s: operator-only %v", e.Name, e.OperatorOnly)
		}
	}
	bot := authority.Caller{Seat: "bot", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}
	for _, name := range operatorTools {
		if slices.Contains(seat, name) || !slices.Contains(operator, name) {
			t.Errorf("%s: offered to the seat %v, to the operator %v", name, slices.Contains(seat, name), slices.Contains(operator, name))
		}
		res := h.Router().Call(context.Background(), h.SeatRegistry("bot"), bot, name, []byte(`{}`))
		if class, _ := servers.ClassOf(res); class != authority.Forbidden {
			t.Errorf("the seat's call to %s: %q", name, class)
		}
	}
	if len(operator)-len(seat) != len(operatorTools) {
		t.Errorf("the operator has %d tools, the seat %d", len(operator), len(seat))
	}
}

// OPS-6: a key names the operation whatever the write: a whole-value write
// (save_view states the whole view, and over MCP each call is its own
// operation) sent again under its key is the same operation, and the same
// request sent at once from two connections lands once.
func TestOperatorActKeyNamesEveryWrite(t *testing.T) {
	h := newOpsHub(t)
	save := actCall("save_view", map[string]any{"name": "Mine", "assignee": "me"})
	_, first := act(t, h.url, adaToken, "view-1", save)
	_, again := act(t, h.url, adaToken, "view-1", save)
	if sc, _ := structured(t, again); sc["version"] != float64(1) || !reflect.DeepEqual(first, again) {
		t.Fatalf("a whole-value write sent again under its key: %v then %v", first, again)
	}
	if _, next := act(t, h.url, adaToken, "view-2", save); next["structuredContent"].(map[string]any)["version"] != float64(2) {
		t.Fatalf("under a new key: %v", next)
	}

	create := actCall("create_work_item", map[string]any{"title": "Once", "project": "CORE"})
	answers := make(chan map[string]any, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, h.url+"/operator/act", strings.NewReader(create))
			req.Header.Set("Authorization", "Bearer "+ciToken)
			req.Header.Set(IdempotencyKeyHeader, "together")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- map[string]any{"error": err.Error()}
				return
			}
			defer resp.Body.Close()
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			answers <- out
		}()
	}
	a, b := <-answers, <-answers
	if !reflect.DeepEqual(a, b) || a["isError"] == true {
		t.Fatalf("the same request at once answered\n%v\n%v", a, b)
	}
	_, list := act(t, h.url, adaToken, "", actCall("list_work_items", nil))
	if sc, _ := structured(t, list); len(sc["items"].([]any)) != 1 {
		t.Fatalf("items filed: %v", sc["items"])
	}
}
