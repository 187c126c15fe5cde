package e2e_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fleet's seats running turns, end to end (issue 27): three `crewlet
// serve` processes on a fake model. steer_turn through a node that does
// not hold the seat reaches its running turn, and is not_running for a
// seat running none and unavailable while the seat's holder is dead; a
// seat's first turn after kill -9 moved it calls its per-role child's
// tool; two seats on two nodes spend against one company budget, which
// they pass by no more than the stated bound, and a seat moved by kill -9
// keeps what it spent.

// fleetCeiling is the company's day ceiling in the test's company.
const fleetCeiling = 40000

// spendInput and spendOutput are what each model call of a spending turn
// reports: output is the part no reservation holds.
const spendInput, spendOutput = 100, 900

func fleetTurnCompany(model string) func(marker, bin string) string {
	return func(marker, bin string) string {
		seat := func(name, handle string) string {
			return fmt.Sprintf("      - name: %s\n        handle: %s\n        mcp_env: {worker: {WHO: \"%s-%s\"}}\n", name, handle, handle, marker)
		}
		return fmt.Sprintf(`providers:
  fake: {api: openai, base_url: %q, api_key: "${E2E_MODEL_KEY}"}
models:
  default: {provider: fake, model: e2e-model}
budget:
  company: {day: %d}
units:
  - id: core
    name: Core
    lead: ada
    project: CORE
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
%s%s%sapi: {auth: {tokens: [{id: ada, token: "${E2E_TOKEN}", seat: ada}]}}
mcp_servers:
  - {name: worker, shared: false, command: %q, tool_prefix: worker_, trust: auto}
`, model, fleetCeiling, seat("Alice", "alice"), seat("Bob", "bob"), seat("Carol", "carol"), bin)
	}
}

// fleetModel answers the test's turns by what woke them.
type fleetModel struct {
	marker string
	// steer: the held turn's first round signals asked and waits for
	// release; what its next round read is kept.
	asked, release chan struct{}
	mu             sync.Mutex
	steerRead      string
	toolResults    []modeltest.Result
	// spent counts the replies to spending turns.
	spent atomic.Int64
}

func (m *fleetModel) script(c modeltest.Conversation) modeltest.Reply {
	text := c.UserText()
	// What woke the turn is its first line; what follows may recall
	// earlier turns' words.
	woke, _, _ := strings.Cut(text, "\n")
	item := e2eItemRe.FindString(woke)
	comment := func(body string) modeltest.Reply {
		return modeltest.Reply{Calls: []modeltest.Call{{Name: "comment_on_work_item", Args: map[string]any{"key": item, "body": body}}}, Input: 1, Output: 1}
	}
	switch {
	case strings.Contains(woke, "steer-"+m.marker):
		if c.Round() == 0 {
			m.asked <- struct{}{}
			<-m.release
			return comment("Looking at it.")
		}
		m.mu.Lock()
		m.steerRead = text
		m.mu.Unlock()
		return modeltest.Reply{Text: "Done.", Input: 1, Output: 1}
	case strings.Contains(woke, "tool-"+m.marker):
		switch c.Round() {
		case 0:
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "worker_test_simple_text", Args: map[string]any{}}}, Input: 1, Output: 1}
		case 1:
			m.mu.Lock()
			m.toolResults = c.LastResults()
			m.mu.Unlock()
			return comment("My tool answered.")
		}
		return modeltest.Reply{Text: "Done.", Input: 1, Output: 1}
	case strings.Contains(woke, "spend-"+m.marker):
		m.spent.Add(1)
		return modeltest.Reply{Text: "Thinking it over.", Input: spendInput, Output: spendOutput}
	}
	return modeltest.Reply{Text: "Done.", Input: 1, Output: 1}
}

// mention files an item through cs and names seat on it with words.
func mention(t *testing.T, cs *mcp.ClientSession, seat, words string) string {
	t.Helper()
	key := structured(t, callTool(t, cs, "create_work_item", map[string]any{"title": words}))["key"].(string)
	callTool(t, cs, "comment_on_work_item", map[string]any{"key": key, "body": "@" + seat + " " + words})
	return key
}

// steer sends steer_turn for seat through cs, answering its structured
// result or its refusal's class and text.
func steer(t *testing.T, cs *mcp.ClientSession, seat, note string) (map[string]any, authority.Class, string) {
	t.Helper()
	res := callTool(t, cs, "steer_turn", map[string]any{"seat": seat, "note": note})
	if res.IsError {
		class, _ := servers.ClassOf(res)
		return nil, class, hubtest.Text(res)
	}
	return structured(t, res), "", ""
}

func TestFleetTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a fleet of three hub processes; it runs in every full test run")
	}
	m := &fleetModel{asked: make(chan struct{}, 1), release: make(chan struct{})}
	model := modeltest.Start(t, m.script)
	r := newFleetRigOf(t, false, fleetTurnCompany(model.OpenAIBase()), "E2E_MODEL_KEY=sk-e2e-model-key")
	m.marker = r.marker
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	holderOf := func(seat string) int {
		t.Helper()
		var on int
		waitUntil(t, time.Minute, seat+"'s child on its holder", func() (bool, string) {
			on = r.runsOn(seat)
			for i, h := range r.hubs {
				if h.cmd.ProcessState == nil && on >= 0 {
					return r.fleet(t, i).Holders[seat] == fmt.Sprintf("n%d", on), fmt.Sprint(r.seatProcs(seat))
				}
			}
			return false, "no live node"
		})
		return on
	}
	clients := []*mcp.ClientSession{r.client(t, 0), r.client(t, 1), r.client(t, 2)}
	alice := holderOf("alice")
	other := (alice + 1) % 3
	phase(fmt.Sprintf("alice on n%d", alice))

	// steer_turn through a node that does not hold alice: her holder
	// answers not_running, then takes the note into her running turn.
	if _, class, text := steer(t, clients[other], "alice", "Check the deploy log."); class != authority.NotRunning {
		t.Fatalf("steering idle alice through n%d: %s %s", other, class, text)
	}
	mention(t, clients[other], "alice", "steer-"+r.marker+" why did the deploy fail?")
	<-m.asked
	out, class, text := steer(t, clients[other], "alice", "Check the deploy log before answering.")
	close(m.release)
	if class != "" || out["note"] != "queued" {
		t.Fatalf("steering alice's running turn through n%d: %v %s %s", other, out, class, text)
	}
	waitLog(t, r.hubs[alice], time.Minute, "turn_ended", `"seat":"alice"`, `"turn":"`+out["turn"].(string)+`"`)
	m.mu.Lock()
	read := m.steerRead
	m.mu.Unlock()
	if !strings.Contains(read, "Check the deploy log before answering.") || !strings.Contains(read, "by=@ada (human)") {
		t.Fatalf("alice's turn read, after the steer: %s", read)
	}
	phase("steered through another node")

	// kill -9 alice's holder: while her lease outlives it, a steer finds a
	// holder that does not answer.
	r.kill(t, alice)
	live := (alice + 1) % 3
	if _, class, text := steer(t, clients[live], "alice", "Are you there?"); class != authority.Unavailable {
		t.Fatalf("steering alice while her holder is dead: %s %s", class, text)
	}
	phase("unavailable while the holder is dead")
	moved := holderOf("alice")
	phase(fmt.Sprintf("alice moved to n%d", moved))
	// Her first turn on the new node has her per-role child's tools.
	mention(t, clients[live], "alice", "tool-"+r.marker+" what does your tool say?")
	waitLog(t, r.hubs[moved], time.Minute, "turn_ended", `"seat":"alice"`, `"outcome":"delivered"`)
	m.mu.Lock()
	results := m.toolResults
	m.mu.Unlock()
	if len(results) != 1 || results[0].IsError || !strings.Contains(results[0].Text, "This is a simple text response for testing.") {
		for _, c := range model.Requests() {
			t.Logf("asked (round %d, tools %d, results %+v): %.300q", c.Round(), len(c.Tools), c.LastResults(), c.UserText())
		}
		t.Logf("n%d's log:\n%s", moved, r.hubs[moved].logs())
		t.Fatalf("alice's first turn after the move called her child's tool: %+v", results)
	}
	phase("the moved seat's first turn called its child's tool")

	// Back to three nodes, then two seats on two nodes spend against the
	// company's one budget.
	victim := alice
	r.restart(t, victim)
	clients[victim] = r.client(t, victim)
	r.settle(t, (victim+1)%3)
	seats := map[int]string{}
	for _, s := range []string{"alice", "bob", "carol"} {
		on := holderOf(s)
		if _, taken := seats[on]; !taken {
			seats[on] = s
		}
	}
	if len(seats) < 2 {
		t.Fatalf("every seat runs on one node: %v", seats)
	}
	var spenders []string
	var nodes []int
	for on, s := range seats {
		if len(spenders) < 2 {
			spenders, nodes = append(spenders, s), append(nodes, on)
		}
	}
	phase(fmt.Sprintf("spending: %s on n%d, %s on n%d", spenders[0], nodes[0], spenders[1], nodes[1]))
	const wakes = 30
	var wg sync.WaitGroup
	for i, s := range spenders {
		wg.Go(func() {
			for k := range wakes {
				mention(t, clients[(nodes[i]+1)%3], s, fmt.Sprintf("spend-%s %d", r.marker, k))
			}
		})
	}
	wg.Wait()
	for i, s := range spenders {
		waitUntil(t, 2*time.Minute, s+"'s wakes all answered", func() (bool, string) {
			logs := r.hubs[nodes[i]].logs()
			ended := countLog(logs, "turn_ended", `"seat":"`+s+`"`)
			refused := countLog(logs, "turn_ended", `"seat":"`+s+`"`, `"outcome":"budget_exhausted"`)
			return ended >= wakes && refused > 0, fmt.Sprintf("%d turns ended, %d refused by the budget", ended, refused)
		})
	}
	total := m.spent.Load() * (spendInput + spendOutput)
	// The stated bound: one reply's output per turn running at once, one
	// per spending seat here.
	bound := int64(len(spenders) * spendOutput)
	t.Logf("the fleet spent %d against a company ceiling of %d (bound %d)", total, fleetCeiling, bound)
	if total > fleetCeiling+bound {
		t.Fatalf("two seats on two nodes spent %d, past the company ceiling of %d by more than %d", total, fleetCeiling, bound)
	}
	if total < fleetCeiling/2 {
		t.Fatalf("the fleet stopped spending at %d, far under its ceiling of %d", total, fleetCeiling)
	}
	phase("the company budget held across two nodes")

	// The spender's node killed, its seat moves and keeps what it spent:
	// its next wake is refused before the model is asked.
	victim = nodes[0]
	r.kill(t, victim)
	movedTo := holderOf(spenders[0])
	before := m.spent.Load()
	refusedBefore := countLog(r.hubs[movedTo].logs(), "turn_ended", `"seat":"`+spenders[0]+`"`, `"outcome":"budget_exhausted"`)
	key := mention(t, clients[movedTo], spenders[0], "spend-"+r.marker+" after the move")
	waitUntil(t, time.Minute, spenders[0]+"'s wake after the move refused by the budget", func() (bool, string) {
		n := countLog(r.hubs[movedTo].logs(), "turn_ended", `"seat":"`+spenders[0]+`"`, `"outcome":"budget_exhausted"`)
		return n > refusedBefore, fmt.Sprint(n)
	})
	if after := m.spent.Load(); after != before {
		t.Fatalf("%s's turn after the move called the model %d times past the spent budget (%s)", spenders[0], after-before, key)
	}
	phase("the moved seat kept its spending")
}

// countLog counts the log lines of msg holding every want.
func countLog(logs, msg string, wants ...string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}
		all := true
		for _, w := range wants {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}
