package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// warnings keeps the node's log lines at warn and above, as text.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	w.mu.Lock()
	w.lines = append(w.lines, line)
	w.mu.Unlock()
	return nil
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// An answer relayed from another node that the holder could not record
// (its log lost the write's acknowledgement) is refused to the answerer
// in words, and what failed is in the holder's node log, not dropped.
func TestRelayedAnswerNotTakenIsLogged(t *testing.T) {
	node, faults := statetest.OpenFaulty(t, t.TempDir(), state.Options{Projectors: Projectors()})
	logged := &warnings{}
	h, _ := runHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		if isCodingAgent(c) {
			return call("ask_person", map[string]any{"question": "Which greeting?"})
		}
		return seatTurn(c)
	}, time.Hour, func(o *Options) {
		o.Store = NewStore(node)
		o.Logger = slog.New(logged)
	})
	h.store = h.rt.opts.Store
	h.turn()
	out := runOut(t, h.model.Requests())
	h.rt.answerTaken = func(*codeRun) { faults.Set(func(f *statetest.Faults) { f.DropAcks = 1 }) }
	q, _ := json.Marshal(runAnswerAsk{Caller: authority.Caller{Seat: "ada", Kind: authority.KindHuman}, Run: out.Run, Answer: "say hi"})
	var a runAnswerReply
	if err := json.Unmarshal(h.rt.AnswerRunQuestion(q), &a); err != nil {
		t.Fatal(err)
	}
	if a.Class != authority.Unavailable || a.Sentence != "The node holding the run could not take the answer; try again." {
		t.Fatalf("the relayed answer: %+v", a)
	}
	if got := logged.all(); !strings.Contains(got, "run_answer_not_taken run="+out.Run+" error=") {
		t.Fatalf("the node's log said:\n%s", got)
	}
}
