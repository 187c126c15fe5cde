package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

var adaCaller = authority.Caller{Seat: "ada", Kind: authority.KindHuman, OperatorID: "laptop"}

// heldModel is a model one of whose rounds waits, once asked, until the
// test lets it answer: a turn the test knows to be in flight.
type heldModel struct {
	round   int
	asked   chan struct{}
	release chan struct{}
}

func newHeldModel(round int) *heldModel {
	return &heldModel{round: round, asked: make(chan struct{}, 1), release: make(chan struct{})}
}

func (m *heldModel) hold(c modeltest.Conversation) {
	if c.Round() == m.round {
		m.asked <- struct{}{}
		<-m.release
	}
}

func refusedAs(t *testing.T, err error, class authority.Class) {
	t.Helper()
	var r *authority.Refusal
	if !errors.As(err, &r) || r.Class != class {
		t.Fatalf("want %s, got %v", class, err)
	}
}

// OPS-3 steer_turn: a seat running no turn has nothing to steer
// (not_running). A note sent while the turn's model answers is read at
// its next round, fenced as its writer's words, even when that answer
// would have ended the turn (here, a delivered one).
func TestSteerATurn(t *testing.T) {
	m := newHeldModel(1)
	h := newHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		m.hold(c)
		if c.Round() == 0 {
			return call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "on it"})
		}
		return done
	}, []Tool{commentTool}, nil)
	_, err := h.rt.Steer(adaCaller, "alan", "look at the logs first")
	refusedAs(t, err, authority.NotRunning)

	ended := make(chan TurnRecord, 1)
	go func() { ended <- h.turn() }()
	<-m.asked
	key, err := h.rt.Steer(adaCaller, "alan", "look at the logs first")
	if err != nil || key == "" {
		t.Fatalf("steering a turn in flight: %q %v", key, err)
	}
	close(m.release)
	rec := <-ended
	reqs := h.model.Requests()
	if rec.Key != key || rec.Outcome != Delivered || len(reqs) != 3 {
		t.Fatalf("ended %+v after %d requests", rec, len(reqs))
	}
	read := reqs[2].UserText()
	if strings.Contains(reqs[1].UserText(), "look at the logs first") || !strings.Contains(read, "look at the logs first") ||
		!strings.Contains(read, "<<<untrusted") || !strings.Contains(read, "by=@ada (human)") {
		t.Fatalf("the note as the turn read it: %s", read)
	}
	_, err = h.rt.Steer(adaCaller, "alan", "too late")
	refusedAs(t, err, authority.NotRunning)
}

// A turn in its last model round has no round left to read a note in:
// steer_unsupported, and nothing reaches the model.
func TestSteerTheLastRound(t *testing.T) {
	m := newHeldModel(0)
	h := newHarness(t, func(c modeltest.Conversation) modeltest.Reply {
		m.hold(c)
		return call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "here"})
	}, []Tool{commentTool}, func(o *Options) { o.MaxRounds = 1 })
	ended := make(chan TurnRecord, 1)
	go func() { ended <- h.turn() }()
	<-m.asked
	_, err := h.rt.Steer(adaCaller, "alan", "stop")
	refusedAs(t, err, authority.SteerUnsupported)
	close(m.release)
	if rec := <-ended; rec.Outcome != Delivered || h.model.Count() != 1 {
		t.Fatalf("ended %+v after %d requests", rec, h.model.Count())
	}
}

// OPS-3 authority: a decision about an AI seat is for its holder (a
// credential bound to it), the lead of its unit or an administrator; an
// agent, another person or an unbound credential is refused forbidden; a
// person's seat or nobody's is not_found; no seat named is invalid.
func TestMayDecide(t *testing.T) {
	dir := authority.NewDirectory([]authority.Unit{{ID: "core", Lead: "bob"}}, []authority.Seat{
		{Handle: "ada", Kind: authority.SeatHuman, Admin: true},
		{Handle: "bob", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "carol", Kind: authority.SeatHuman, Unit: "core"},
		{Handle: "alan", Kind: authority.SeatAgent, Unit: "core"},
		{Handle: "grace", Kind: authority.SeatAgent, Unit: "core"},
	})
	for _, tc := range []struct {
		who    authority.Caller
		seat   string
		refuse authority.Class
	}{
		{authority.Caller{Seat: "ada", Kind: authority.KindHuman}, "alan", ""},
		{authority.Caller{Seat: "bob", Kind: authority.KindHuman}, "@Alan", ""},
		{authority.Caller{Seat: "alan", Kind: authority.KindHuman}, "alan", ""},
		{authority.Caller{Seat: "token:ci", Kind: authority.KindOperator, Admin: true}, "alan", ""},
		{authority.Caller{Seat: "carol", Kind: authority.KindHuman}, "alan", authority.Forbidden},
		{authority.Caller{Seat: "token:ci", Kind: authority.KindOperator}, "alan", authority.Forbidden},
		{authority.Caller{Seat: "grace", Kind: authority.KindHuman}, "alan", authority.Forbidden},
		{authority.Caller{Seat: "alan", Kind: authority.KindAgent}, "alan", authority.Forbidden},
		{authority.Caller{Seat: "ada", Kind: authority.KindHuman}, "carol", authority.NotFound},
		{authority.Caller{Seat: "ada", Kind: authority.KindHuman}, "nobody", authority.NotFound},
		{authority.Caller{Seat: "ada", Kind: authority.KindHuman}, " ", authority.Invalid},
	} {
		s, err := mayDecide(tc.who, dir, tc.seat, "pause")
		if tc.refuse == "" {
			if err != nil || s.Handle != "alan" {
				t.Errorf("%v on %q: %v %v", tc.who, tc.seat, s, err)
			}
			continue
		}
		var r *authority.Refusal
		if !errors.As(err, &r) || r.Class != tc.refuse {
			t.Errorf("%v on %q: want %s, got %v", tc.who, tc.seat, tc.refuse, err)
		}
	}
}

// heldWakes is a log handler that hands on each wake_held record's wake.
type heldWakes chan string

func (h heldWakes) Enabled(context.Context, slog.Level) bool { return true }
func (h heldWakes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h heldWakes) WithGroup(string) slog.Handler            { return h }
func (h heldWakes) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "wake_held" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "wake" {
				h <- a.Value.String()
			}
			return true
		})
	}
	return nil
}

// OPS-3 pause_seat: a paused seat starts no turn and its wake waits, said
// once on the log, while the seats beside it run theirs; resumed, it runs
// the waiting wake. The pause is on the log, read by whichever runtime
// serves the seat: one started after the pause holds the wake too.
func TestPausedSeatsWakesWait(t *testing.T) {
	held := make(heldWakes, 8)
	h := newHarness(t, modeltest.Steps(call("comment_on_work_item", map[string]any{"key": "CORE-1", "body": "x"}), done), []Tool{commentTool},
		func(o *Options) { o.Logger = slog.New(held) })
	if err := h.rt.Pause(t.Context(), adaCaller, "alan"); err != nil {
		t.Fatal(err)
	}
	feed := &memFeed{}
	h.rt.opts.Feeds = []Feed{FeedOf("mem", feed.read, h.feed.Trigger)}
	if err := h.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waiting := feed.add(t, h.store, servers.Wake{Seat: "alan", Subject: "CORE-1", By: "ada", At: time.Now()})
	other := feed.add(t, h.store, servers.Wake{Seat: "grace", Subject: "CORE-2", By: "ada", At: time.Now()})
	select {
	case w := <-held:
		if turnKeyFor("mem", w) != waiting {
			t.Fatalf("held %s, not %s", w, waiting)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the paused seat's wake was never held")
	}
	waitEnded(t, h.store, other)
	if _, found, _ := h.store.Turn(waiting); found {
		t.Fatal("a paused seat started a turn")
	}
	if p, paused, err := h.store.Paused("alan"); err != nil || !paused || p.By.Seat != "ada" {
		t.Fatalf("the pause on the log: %+v %v %v", p, paused, err)
	}
	if err := h.rt.Resume(t.Context(), adaCaller, "alan"); err != nil {
		t.Fatal(err)
	}
	if rec := waitEnded(t, h.store, waiting); rec.Outcome != Delivered {
		t.Fatalf("the wake that waited: %+v", rec)
	}
	if len(held) != 0 {
		t.Fatalf("the held wake was said %d more times", len(held))
	}
}

// What an answer outside any turn spends is on the log beside the turns'
// spending, so a restarted node's budget windows count it.
func TestSpendOutsideATurnIsKept(t *testing.T) {
	store := NewStore(testNode(t))
	if err := store.spent(t.Context(), adaCaller, "ada", 1234); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := store.Spending(time.Now().Add(-time.Hour), func(seat string, _ time.Time, tokens int64) {
		if seat == "ada" {
			got += tokens
		}
	}); err != nil {
		t.Fatal(err)
	}
	if got != 1234 {
		t.Fatalf("counted %d tokens", got)
	}
}
