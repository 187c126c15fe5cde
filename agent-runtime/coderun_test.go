package agent

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/sandbox"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/serverstest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Coding runs driven through a seat's real turn: the seat's model (the
// fake model server) calls run_sandbox on the engine's builtin server,
// the builtin coding agent's rounds go to the same model under the same
// budget, and every box tool is a real operation in a real bubblewrap box.

// isCodingAgent tells the coding agent's requests from its turn's.
func isCodingAgent(c modeltest.Conversation) bool {
	return strings.HasPrefix(c.System, "You are the coding agent")
}

// askThenGreet is the script of a seat whose turn, held by held, starts a
// coding run that asks a person first and then greets as it was answered.
func askThenGreet(held *heldModel) modeltest.Script {
	return func(c modeltest.Conversation) modeltest.Reply {
		if isCodingAgent(c) {
			if c.Round() == 0 {
				return call("ask_person", map[string]any{"question": "Which greeting?"})
			}
			return helloAgent(c)
		}
		held.hold(c)
		return seatTurn(c)
	}
}

// runHarness is a harness whose seats have run_sandbox, with boxes made
// under boxes and parked runs waiting park.
func runHarness(t *testing.T, script modeltest.Script, park time.Duration, opts ...func(*Options)) (h *harness, boxes string) {
	t.Helper()
	return runHarnessWith(t, script, sandbox.Config{Limits: sandbox.Limits{Park: park, Wall: time.Minute}}, opts...)
}

// runHarnessWith is runHarness with the company's sandbox block cfg.
func runHarnessWith(t *testing.T, script modeltest.Script, cfg sandbox.Config, opts ...func(*Options)) (h *harness, boxes string) {
	t.Helper()
	if _, err := sandbox.Find(); err != nil {
		t.Fatalf("coding runs need bubblewrap: %v", err)
	}
	boxes = t.TempDir()
	var rt *Runtime
	h = newHarness(t, script, nil, func(o *Options) {
		sb := &Sandbox{Dir: boxes,
			Config: func() sandbox.Config { return cfg },
			Env:    func() []string { return sandbox.Env(os.Environ(), nil) }}
		surf := builtinSurfaceOf(t, BuiltinDeps{Directory: o.Directory, Store: o.Store, Sandbox: sb, Runtime: func() *Runtime { return rt }})
		surf.add(commentTool, `{"outcome":"applied"}`)
		o.Hub = builtinHub{surf}
		for _, opt := range opts {
			opt(o)
		}
	})
	rt = h.rt
	return h, boxes
}

// boxesLeft counts the boxes still on disk.
func boxesLeft(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// runOut reads run_sandbox's answer from the turn's next request.
func runOut(t *testing.T, reqs []modeltest.Conversation) RunResult {
	t.Helper()
	for _, r := range reqs {
		if isCodingAgent(r) {
			continue
		}
		for _, res := range r.LastResults() {
			var out RunResult
			if json.Unmarshal([]byte(res.Text), &out) == nil && out.Run != "" {
				return out
			}
		}
	}
	for _, r := range reqs {
		t.Logf("%v %+v", isCodingAgent(r), r.LastResults())
	}
	t.Fatal("no request carried run_sandbox's answer")
	return RunResult{}
}

// helloAgent is a coding agent that writes a script, runs it and reports
// what it printed; answered, it greets as it was told.
func helloAgent(c modeltest.Conversation) modeltest.Reply {
	greeting := "hello from the box"
	if strings.Contains(c.UserText()+lastText(c), "say hi") {
		greeting = "hi from the box"
	}
	last := c.Messages[len(c.Messages)-1]
	switch {
	case len(last.Results) == 0 || strings.Contains(lastText(c), "answered:"):
		return call("write_file", map[string]any{"path": "hello.sh", "content": "echo " + greeting + "\n"})
	case strings.HasPrefix(lastText(c), "Wrote "):
		return call("run_command", map[string]any{"command": "sh hello.sh && git add hello.sh && git commit -qm 'add hello.sh'"})
	}
	return call("finish", map[string]any{"report": "The script printed: " + lastText(c)})
}

func lastText(c modeltest.Conversation) string {
	if res := c.LastResults(); len(res) > 0 {
		return res[0].Text
	}
	return ""
}

// seatTurn answers a turn's rounds: run_sandbox with a task, then a
// comment, then done.
func seatTurn(c modeltest.Conversation) modeltest.Reply {
	switch c.Round() {
	case 0:
		return call("run_sandbox", map[string]any{"task": "Write hello.sh that greets, run it and commit it."})
	case 1:
		return call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "ran it"})
	}
	return done
}

// BLT-1 run_sandbox, issue 38: the builtin agent writes a script with
// write_file, runs it with run_command in a real box, and what it printed
// reaches the turn in the run's report, with the commit it made; the run
// is on the log, its rounds are its own (the turn's are three), and its
// box is removed when the turn ends.
func TestRunSandboxInATurn(t *testing.T) {
	h, boxes := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if isCodingAgent(c) {
			return helloAgent(c)
		}
		return seatTurn(c)
	}, time.Hour)
	rec := h.turn()
	if rec.Outcome != Delivered || rec.Rounds != 3 {
		t.Fatalf("the turn: %+v", rec)
	}
	out := runOut(t, h.model.Requests())
	if out.Outcome != RunDone || !strings.Contains(out.Report, "hello from the box") || len(out.Refs) != 1 ||
		!strings.HasSuffix(out.Refs[0], " add hello.sh") || out.Rounds != 3 {
		t.Fatalf("run_sandbox answered %+v", out)
	}
	var agent modeltest.Conversation
	for _, r := range h.model.Requests() {
		if isCodingAgent(r) {
			agent = r
		}
	}
	for _, tool := range []string{"write_file", "read_file", "list_files", "run_command", "ask_person", "finish"} {
		if !agent.Offers(tool) {
			t.Errorf("the coding agent was not offered %s: %v", tool, agent.Tools)
		}
	}
	if agent.Offers("comment_on_work_item") || agent.Offers("run_sandbox") {
		t.Errorf("the coding agent was offered the seat's tools: %v", agent.Tools)
	}
	run, _, err := h.store.RunByID(out.Run)
	if err != nil || run.State != RunEnded || run.Outcome != RunDone || run.Turn != rec.Key || run.Asker != "ada" ||
		!strings.Contains(run.Report, "hello from the box") {
		t.Fatalf("the run on the log: %+v %v", run, err)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the turn ended", n)
	}
}

// Park and answer: the agent asks, the run parks and the turn is
// answered its question; the box outlives the turn while the run waits;
// answered, the run goes on from the question with the answer fenced as
// the person's words, ends done, and its box is removed.
func TestRunParksAndIsAnswered(t *testing.T) {
	h, boxes := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if isCodingAgent(c) {
			if c.Round() == 0 {
				return call("ask_person", map[string]any{"question": "Which greeting?"})
			}
			return helloAgent(c)
		}
		return seatTurn(c)
	}, time.Hour)
	h.turn()
	out := runOut(t, h.model.Requests())
	if out.Outcome != RunParked || out.Question != "Which greeting?" || out.Asker != "ada" {
		t.Fatalf("run_sandbox answered %+v", out)
	}
	if run, _, _ := h.store.RunByID(out.Run); run.State != RunParked || run.Question != "Which greeting?" || run.Deadline.IsZero() {
		t.Fatalf("the parked run on the log: %+v", run)
	}
	if n := boxesLeft(t, boxes); n != 1 {
		t.Fatalf("%d boxes while the run is parked", n)
	}
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman, OperatorID: "laptop"}
	done, err := h.rt.AnswerRun(t.Context(), ada, out.Run, "say hi")
	if err != nil || done.Outcome != RunDone || !strings.Contains(done.Report, "hi from the box") || len(done.Refs) != 1 {
		t.Fatalf("answered: %+v %v", done, err)
	}
	reqs := h.model.Requests()
	var resumed modeltest.Conversation
	for _, r := range reqs {
		if isCodingAgent(r) && r.Round() == 1 {
			resumed = r
		}
	}
	if got := lastText(resumed); !strings.Contains(got, "say hi") || !strings.Contains(got, "<<<untrusted") || !strings.Contains(got, "by=@ada (human)") {
		t.Fatalf("the answer as the agent read it: %q", got)
	}
	if run, _, _ := h.store.RunByID(out.Run); run.State != RunEnded || run.Outcome != RunDone || run.AnsweredBy != "ada" {
		t.Fatalf("the answered run on the log: %+v", run)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the answered run ended", n)
	}
	if _, err := h.rt.AnswerRun(t.Context(), ada, out.Run, "again"); err != ErrRunNotHere {
		t.Fatalf("a second answer: %v", err)
	}
}

// A run parked past its park ends expired, its box removed first; a late
// answer finds nothing parked.
func TestParkedRunExpires(t *testing.T) {
	h, boxes := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if isCodingAgent(c) {
			return call("ask_person", map[string]any{"question": "Which greeting?"})
		}
		return seatTurn(c)
	}, 300*time.Millisecond)
	h.turn()
	out := runOut(t, h.model.Requests())
	node := h.store.Node()
	for {
		pos := node.Position()
		run, _, err := h.store.RunByID(out.Run)
		if err != nil {
			t.Fatal(err)
		}
		if run.State == RunEnded {
			if run.Outcome != RunExpired || !strings.Contains(run.Report, "Which greeting?") {
				t.Fatalf("the expired run: %+v", run)
			}
			break
		}
		if err := node.WaitFor(t.Context(), pos+1); err != nil {
			t.Fatal(err)
		}
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left after the park expired", n)
	}
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman}
	if _, err := h.rt.AnswerRun(t.Context(), ada, out.Run, "too late"); err != ErrRunNotHere {
		t.Fatalf("an answer after expiry: %v", err)
	}
}

// A run answered while the turn that started it still runs goes on as its
// own: the turn's rounds are its own three, the run ends done, what the
// resumed run's model calls spent is recorded apart (it belongs to no
// turn's end), and the box is removed once both are over.
func TestRunAnsweredWhileItsTurnRuns(t *testing.T) {
	held := newHeldModel(1)
	h, boxes := runHarness(t, askThenGreet(held), time.Hour)
	ended := make(chan TurnRecord, 1)
	go func() { ended <- h.turn() }()
	<-held.asked
	out := runOut(t, h.model.Requests())
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman}
	done, err := h.rt.AnswerRun(t.Context(), ada, out.Run, "say hi")
	if err != nil || done.Outcome != RunDone || !strings.Contains(done.Report, "hi from the box") {
		t.Fatalf("answered: %+v %v", done, err)
	}
	close(held.release)
	rec := <-ended
	if rec.Outcome != Delivered || rec.Rounds != 3 {
		t.Fatalf("the turn: %+v", rec)
	}
	rows := 0
	if err := h.store.Spending(time.Now().Add(-time.Hour), func(seat string, _ time.Time, tokens int64) {
		if seat == "alan" && tokens > 0 {
			rows++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d spending rows; want the turn's and the resumed run's", rows)
	}
	if n := boxesLeft(t, boxes); n != 0 {
		t.Fatalf("%d boxes left", n)
	}
}

// The caps of a coding run, each a number said in its refusal: a question
// past 4000 bytes and a report past 64 KiB are refused to the agent (it
// says them shorter), and a run past its model rounds (RunRounds) ends
// failed saying so; a task past 64 KiB is refused to the seat and an
// answer past 4000 bytes to the person.
func TestRunCaps(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n+1) }
	h, _ := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if !isCodingAgent(c) {
			return seatTurn(c)
		}
		switch c.Round() {
		case 0:
			return call("ask_person", map[string]any{"question": long(4000)})
		case 1:
			return call("finish", map[string]any{"report": long(64 << 10)})
		}
		return call("list_files", map[string]any{})
	}, time.Hour, func(o *Options) { o.RunRounds = 4 })
	h.turn()
	out := runOut(t, h.model.Requests())
	if out.Outcome != RunFailed || out.Report != "The run used its 4 model rounds without finishing." {
		t.Fatalf("run_sandbox answered %+v", out)
	}
	var refusals []string
	for _, c := range h.model.Requests() {
		if isCodingAgent(c) && c.Round() > 0 {
			refusals = append(refusals, lastText(c))
		}
	}
	if len(refusals) != 3 || !strings.Contains(refusals[0], "Refused (invalid): question is 4001 bytes, past the limit of 4000") ||
		!strings.Contains(refusals[1], "Refused (invalid): report is 65537 bytes, past the limit of 65536") {
		t.Fatalf("the agent was answered %q", refusals)
	}

	c := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server {
		return NewBuiltinServer(BuiltinDeps{Directory: func() *authority.Directory { return testDirectory() },
			Sandbox: &Sandbox{}, Runtime: func() *Runtime { return h.rt }}, trust, nil)
	})
	seat := authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "trk-x"}
	r := c.Refused(seat, "run_sandbox", map[string]any{"task": long(64 << 10)}, authority.Invalid)
	serverstest.MustContain(t, r.Sentence, "65536")
	d := serverstest.Connect(t, func(trust servers.Trust) *mcp.Server {
		return NewDecisionServer(DecisionDeps{Directory: func() *authority.Directory { return testDirectory() }, Runtime: func() *Runtime { return h.rt }}, trust, nil)
	})
	ada := authority.Caller{Seat: "ada", Kind: authority.KindHuman}
	r = d.Refused(ada, "answer_run", map[string]any{"run": out.Run, "answer": long(4000)}, authority.Invalid)
	serverstest.MustContain(t, r.Sentence, "4001 bytes", "4000")
}
