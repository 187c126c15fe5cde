package hub

// Deciding held tools (issue 28): list_tool_changes and decide_tool_change
// over the operator surface, their refusals, and the screen's review,
// which decides through the same tool. The rig and the held-tool rules
// are in pinning_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// changesOver lists the held tools over /operator/mcp, as a person's own
// assistant would.
func changesOver(t *testing.T, cs *mcp.ClientSession, server string) []toolpin.Change {
	t.Helper()
	args := map[string]any{}
	if server != "" {
		args["server"] = server
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_tool_changes", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("list_tool_changes: %v %s", err, hubtest.Text(res))
	}
	var out struct {
		Changes []toolpin.Change `json:"changes"`
	}
	if err := json.Unmarshal([]byte(hubtest.Text(res)), &out); err != nil {
		t.Fatal(err)
	}
	return out.Changes
}

// Issue 28, item 3: over /operator/mcp a person lists what is held — the
// text the server lists now beside the one approved, the schema diff and
// the scanner's flags — and decides it over /operator/act, under an
// Idempotency-Key, attributed like every operator write: the seat the
// credential is bound to, and the credential. The tool is offered once
// the answer is given; a rejection keeps it out, and deciding it again
// changes nothing.
func TestToolChangesListedAndDecidedOnTheOperatorSurface(t *testing.T) {
	r := newPinRig(t, plainForecast, "", true)
	r.await("filed", func() bool { return r.held("forecast") != "absent" && r.held("echo") != "absent" })
	cs := hubtest.Connect(t, r.url+"/operator/mcp", pinToken, "")
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(lt.Tools, func(t *mcp.Tool) bool { return t.Name == "decide_tool_change" }) {
		t.Fatalf("the operator catalogue has no decide_tool_change: %v", err)
	}
	if offeredTo(r.h.SeatRegistry("bot"), "list_tool_changes") || offeredTo(r.h.SeatRegistry("bot"), "decide_tool_change") {
		t.Fatal("a seat is offered the tool-change tools")
	}
	changes := changesOver(t, cs, "weather")
	if len(changes) != 2 || changes[0].Tool != "echo" || changes[1].Tool != "forecast" || changes[1].State != heldNew ||
		changes[1].Proposed.Description != plainForecast || changes[1].Approved != nil {
		t.Fatalf("changes %+v", changes)
	}
	// Every tool of the server at once, under a key.
	status, body := act(t, r.url, pinToken, "approve-weather-1", actCall("decide_tool_change", map[string]any{"server": "weather", "decision": "approve"}))
	sc, class := structured(t, body)
	if status != http.StatusOK || class != "" || sc["outcome"] != "applied" || sc["op_id"] == "" || len(sc["tools"].([]any)) != 2 ||
		sc["tools"].([]any)[1].(map[string]any)["now"] != "offered" {
		t.Fatalf("decide: %d %v", status, body)
	}
	if !offeredTo(r.h.SeatRegistry("bot"), "forecast") || !offeredTo(r.h.SeatRegistry("bot"), "echo") {
		t.Fatal("approved tools are not offered once the answer is given")
	}
	pins, _ := r.store.Pins()
	if a := pins[toolpin.Key{Server: "weather", Tool: "forecast"}].Approved; a == nil ||
		a.By != (servers.Author{Seat: "ada", Kind: authority.KindHuman}) || a.OperatorID != "laptop" {
		t.Fatalf("approval recorded as %+v", a)
	}
	// The same key and call again is the same operation.
	_, again := act(t, r.url, pinToken, "approve-weather-1", actCall("decide_tool_change", map[string]any{"server": "weather", "decision": "approve"}))
	if sc2, class := structured(t, again); class != "" || sc2["op_id"] != sc["op_id"] || sc2["position"] != sc["position"] {
		t.Fatalf("retried under its key: %v, first %v", again, body)
	}

	// The rug pull: after a restart the list shows the diff and the flags.
	r.setDesc(poisonedForecast)
	r.restart()
	r.await("forecast held", func() bool { return r.held("forecast") == heldChanged })
	changes = changesOver(t, cs, "")
	if len(changes) != 1 {
		t.Fatalf("changes %+v", changes)
	}
	ch := changes[0]
	kinds := map[string]bool{}
	for _, f := range ch.Flags {
		kinds[string(f.Kind)] = true
		if got := ch.Proposed.Description[f.Start:f.End]; f.Kind != "long_description" && got == "" {
			t.Errorf("flag %+v spans nothing", f)
		}
	}
	if ch.State != heldChanged || !ch.DescriptionChanged || ch.Approved == nil || ch.Approved.Def.Description != plainForecast ||
		ch.Proposed.Description != poisonedForecast || !kinds["addressed_to_model"] || !kinds["credential_reference"] {
		t.Fatalf("the change reads %+v", ch)
	}
	reject := func(key string) map[string]any {
		_, body := act(t, r.url, pinToken, key, actCall("decide_tool_change", map[string]any{"server": "weather", "decision": "reject",
			"tools": []map[string]any{{"tool": "forecast", "fingerprint": ch.Fingerprint}}}))
		sc, class := structured(t, body)
		if class != "" {
			t.Fatalf("reject: %v", body)
		}
		return sc
	}
	if sc := reject("reject-1"); sc["outcome"] != "applied" || sc["tools"].([]any)[0].(map[string]any)["now"] != "held" {
		t.Fatalf("reject: %v", sc)
	}
	if r.held("forecast") != heldRejected || offeredTo(r.h.SeatRegistry("bot"), "forecast") {
		t.Fatal("a rejected tool is offered")
	}
	if sc := reject("reject-2"); sc["outcome"] != "unchanged" {
		t.Fatalf("a second rejection: %v", sc)
	}
}

// Every refusal the tool-change tools make: a person who is no
// administrator, a decision that is neither, a server or tool with
// nothing held, a fingerprint the server no longer lists, and a seat
// asking (the router's, for an operator-only tool).
func TestToolChangeRefusals(t *testing.T) {
	r := newPinRig(t, plainForecast, "", true)
	r.await("filed", func() bool { return r.held("forecast") != "absent" })
	cs := hubtest.Connect(t, r.url+"/operator/mcp", pinToken, "")
	fp := changesOver(t, cs, "weather")[1].Fingerprint
	for _, tc := range []struct {
		name, token string
		args        map[string]any
		class       authority.Class
		words       string
	}{
		{"not an administrator", "bea-token-1234567", map[string]any{"server": "weather", "decision": "approve"}, authority.Forbidden, "Only an administrator"},
		{"neither verdict", pinToken, map[string]any{"server": "weather", "decision": "maybe"}, authority.Invalid, `not "maybe"`},
		{"no such server", pinToken, map[string]any{"server": "nope", "decision": "approve"}, authority.NotFound, `Server "nope" has no tool held`},
		{"no such tool", pinToken, map[string]any{"server": "weather", "decision": "approve",
			"tools": []map[string]any{{"tool": "nope", "fingerprint": fp}}}, authority.NotFound, `holds no tool "nope"`},
		{"stale fingerprint", pinToken, map[string]any{"server": "weather", "decision": "approve",
			"tools": []map[string]any{{"tool": "forecast", "fingerprint": "sha256:00"}}}, authority.StaleVersion, fp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := act(t, r.url, tc.token, "k-"+strings.ReplaceAll(tc.name, " ", "-"), actCall("decide_tool_change", tc.args))
			sc, class := structured(t, body)
			if class != tc.class || !strings.Contains(fmt.Sprint(sc["sentence"]), tc.words) {
				t.Fatalf("%s: %v", class, body)
			}
		})
	}
	if r.held("forecast") != heldNew || r.held("echo") != heldNew {
		t.Fatal("a refused decision released a tool")
	}
	for _, tool := range []string{"list_tool_changes", "decide_tool_change"} {
		res := r.h.Router().Call(context.Background(), r.h.SeatRegistry("bot"), bot, tool, []byte(`{"server":"weather","decision":"approve"}`))
		if class, _ := servers.ClassOf(res); class != authority.Forbidden {
			t.Fatalf("a seat's %s: %s %q", tool, class, hubtest.Text(res))
		}
	}
	// The same decision over /operator/mcp, from a person's own client,
	// which is told the catalogue moved.
	changed := make(chan struct{}, 1)
	cs2, err := hubtest.Dial(t, r.url+"/operator/mcp", pinToken, "", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	res, err := cs2.CallTool(context.Background(), &mcp.CallToolParams{Name: "decide_tool_change", Arguments: map[string]any{"server": "weather", "decision": "approve",
		"tools": []map[string]any{{"tool": "forecast", "fingerprint": fp}}}})
	if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), `"now":"offered"`) {
		t.Fatalf("decide over /operator/mcp: %v %s", err, hubtest.Text(res))
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed after a tool was released")
	}
	lt, err := cs2.ListTools(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(lt.Tools, func(t *mcp.Tool) bool { return t.Name == "forecast" }) {
		t.Fatalf("the released tool is not listed on /operator/mcp: %v", err)
	}
}

// Issue 28: the screen decides through decide_tool_change as the person
// signed in, under the form's key: attributed to them, and a form sent
// again is the same decision, which approves nothing that changed since.
// A form with no key decides nothing.
func TestScreenDecisionIsTheOperatorToolUnderTheFormsKey(t *testing.T) {
	r := newPinRig(t, plainForecast, "", true)
	r.await("forecast held", func() bool { return r.held("forecast") == heldNew })
	b := screenBackend{r.h.operator}
	ada := authority.Principal{TokenID: "laptop", Seat: "ada", Admin: true}
	form := screen.ToolDecision{Server: "weather", Verdict: "approve", Key: "screen-k1"}
	if res := b.DecideTools(context.Background(), ada, screen.ToolDecision{Server: "weather", Verdict: "approve"}); res.Class != string(authority.Invalid) {
		t.Fatalf("a form with no key answered %+v", res)
	}
	if s := r.held("forecast"); s != heldNew {
		t.Fatalf("a form with no key decided: forecast is %s", s)
	}
	first := b.DecideTools(context.Background(), ada, form)
	if first.Error != "" || !slices.Contains(first.Tools, screen.DecidedTool{Tool: "forecast", Now: "offered"}) {
		t.Fatalf("approve from the screen answered %+v", first)
	}
	pins, err := r.store.Pins()
	if err != nil {
		t.Fatal(err)
	}
	got := pins[toolpin.Key{Server: "weather", Tool: "forecast"}].Approved
	if got == nil || got.By.Seat != "ada" || got.OperatorID != "laptop" {
		t.Fatalf("the approval is recorded as %+v, want by ada under credential laptop", got)
	}

	r.setDesc(plainForecast + " Now with wind.")
	r.restart()
	r.await("forecast held again", func() bool { return r.held("forecast") == heldChanged })
	if again := b.DecideTools(context.Background(), ada, form); again.Error != "" {
		t.Fatalf("the form sent again answered %+v", again)
	}
	if s := r.held("forecast"); s != heldChanged {
		t.Fatalf("the same form sent again approved the changed tool: it is %s", s)
	}
	form.Key = "screen-k2"
	if res := b.DecideTools(context.Background(), ada, form); res.Error != "" {
		t.Fatalf("a new form answered %+v", res)
	}
	if s := r.held("forecast"); s != "offered" {
		t.Fatalf("a new form's approval left forecast %s", s)
	}
}
