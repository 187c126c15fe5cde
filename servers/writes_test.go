package servers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// counter is the test projector: a payload names a key, the projector
// counts its writes and answers the count, so a test sees each effect.
type counterPayload struct {
	Key string `json:"key"`
}

func counterProjector() state.Projector {
	return servers.Projector("test.count", func(a *servers.Apply) (any, error) {
		var pl counterPayload
		if err := a.Payload(&pl); err != nil {
			return nil, err
		}
		n := 0
		if v, closer, err := a.R.Get([]byte("count/" + pl.Key)); err == nil {
			n = int(v[0])
			closer.Close()
		}
		n++
		if err := a.B.Set([]byte("count/"+pl.Key), []byte{byte(n)}, nil); err != nil {
			return nil, err
		}
		return map[string]any{"key": pl.Key, "count": n, "by": a.By.Seat, "seq": a.Seq()}, nil
	})
}

type countResult struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
	By    string `json:"by"`
}

type noteIn struct {
	Key string `json:"key"`
	servers.OpIDArg
}

var (
	seat     = authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada", TurnKey: "turn-1"}
	person   = authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada", OperatorID: "laptop"}
	turnless = authority.Caller{Seat: "alan", Kind: authority.KindAgent, Requester: "ada"}
)

func openWrites(t *testing.T) (*servers.Writes, *state.Node, *statetest.FaultLog) {
	node, f := statetest.OpenFaulty(t, t.TempDir(), state.Options{Projectors: []state.Projector{counterProjector()}, ProjectionWait: 200 * time.Millisecond})
	return servers.NewWrites(node, servers.WritesOptions{Server: "the test server", Look: "get_note"}), node, f
}

func count(key string) func(pebble.Reader) (servers.Intent, error) {
	return func(pebble.Reader) (servers.Intent, error) {
		return servers.Intent{Kind: "test.count", Payload: counterPayload{Key: key}, What: "the note " + key}, nil
	}
}

func refusal(t *testing.T, err error, class authority.Class) *authority.Refusal {
	t.Helper()
	r := authority.AsRefusal(err)
	if err == nil || r.Class != class {
		t.Fatalf("error %v, want %s", err, class)
	}
	return r
}

// OPS-5, WR-5: which operation a call is.
func TestBeginDecidesTheOperation(t *testing.T) {
	w, _, _ := openWrites(t)
	a, err := w.Begin(seat, "write_note", &noteIn{Key: "k"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Begin(seat, "write_note", &noteIn{Key: "k"}, false)
	if a.ID != b.ID {
		t.Fatal("the same call in one turn is two operations")
	}
	if c, _ := w.Begin(seat, "write_note", &noteIn{Key: "other"}, false); c.ID == a.ID {
		t.Fatal("a reworded call is the same operation")
	}
	if d, _ := w.Begin(authority.Caller{Seat: "alan", Kind: authority.KindAgent, TurnKey: "turn-2"}, "write_note", &noteIn{Key: "k"}, false); d.ID == a.ID {
		t.Fatal("another turn's call is the same operation")
	}
	w1, _ := w.Begin(seat, "write_note", &noteIn{Key: "k"}, true)
	w2, _ := w.Begin(seat, "write_note", &noteIn{Key: "k"}, true)
	if w1.ID == w2.ID || w1.ID == a.ID {
		t.Fatal("a whole-value write repeated is one operation")
	}
	p1, _ := w.Begin(person, "write_note", &noteIn{Key: "k"}, false)
	p2, _ := w.Begin(person, "write_note", &noteIn{Key: "k"}, false)
	if p1.ID == p2.ID {
		t.Fatal("an operator's two calls without op_id are one operation")
	}
	in := &noteIn{Key: "k", OpIDArg: servers.OpIDArg{OpID: string(p1.ID)}}
	again, err := w.Begin(person, "write_note", in, false)
	if err != nil || again.ID != p1.ID || in.OpID != "" {
		t.Fatalf("op_id brought back: %v, %v (left in the arguments: %q)", again, err, in.OpID)
	}

	refusal(t, ignore(w.Begin(seat, "write_note", &noteIn{Key: "k", OpIDArg: servers.OpIDArg{OpID: string(p1.ID)}}, false)), authority.Forbidden)
	refusal(t, ignore(w.Begin(turnless, "write_note", &noteIn{Key: "k"}, false)), authority.Forbidden)
	refusal(t, ignore(w.Begin(person, "write_note", &noteIn{Key: "k", OpIDArg: servers.OpIDArg{OpID: "op_nope"}}, false)), authority.Invalid)
	r := refusal(t, ignore(w.Begin(person, "write_note", &noteIn{Key: "else", OpIDArg: servers.OpIDArg{OpID: string(p1.ID)}}, false)), authority.Invalid)
	if !strings.Contains(r.Sentence, "different call") {
		t.Fatalf("sentence %q", r.Sentence)
	}
}

func ignore(_ *servers.Call, err error) error { return err }

// A seat's turn mints its ids at the instant it first wrote, also for a
// fresh Writes over the same node (a restarted server).
func TestTurnStartSurvivesARestart(t *testing.T) {
	w, node, _ := openWrites(t)
	call, _ := w.Begin(seat, "write_note", &noteIn{Key: "k"}, false)
	if _, _, err := servers.Write[countResult](context.Background(), w, call, count("k")); err != nil {
		t.Fatal(err)
	}
	fresh := servers.NewWrites(node, servers.WritesOptions{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	again, _ := fresh.Begin(seat, "write_note", &noteIn{Key: "k"}, false)
	if again.ID != call.ID {
		t.Fatalf("after a restart the turn's call is %s, not %s", again.ID, call.ID)
	}
}

// WR-1, WR-3, WR-5: a write lands once and is answered from the ledger
// after, without deciding again.
func TestWriteLandsOnceAndAnswersFromTheLedger(t *testing.T) {
	w, _, _ := openWrites(t)
	ctx := context.Background()
	call, _ := w.Begin(seat, "write_note", &noteIn{Key: "k"}, false)
	out, res, err := servers.Write[countResult](ctx, w, call, count("k"))
	if err != nil || out.Outcome != state.Applied || out.Position == 0 || res == nil || res.Count != 1 || res.By != "alan" {
		t.Fatalf("first: %+v %+v %v", out, res, err)
	}
	if out.OpID != "" {
		t.Fatalf("a seat was answered an op_id: %+v", out)
	}
	decided := false
	out2, res2, err := servers.Write[countResult](ctx, w, call, func(r pebble.Reader) (servers.Intent, error) {
		decided = true
		return count("k")(r)
	})
	if err != nil || decided || res2.Count != 1 || out2.Position != out.Position {
		t.Fatalf("repeat: %+v %+v %v (decided again: %v)", out2, res2, err, decided)
	}
	p, _ := w.Begin(person, "write_note", &noteIn{Key: "k"}, false)
	pout, _, err := servers.Write[countResult](ctx, w, p, count("k"))
	if err != nil || pout.OpID != string(p.ID) {
		t.Fatalf("an operator's write answers its op_id: %+v %v", pout, err)
	}
}

// Nothing to write: outcome unchanged, at the node's position, no op_id;
// a decide refusal is answered as it is, with nothing written.
func TestUnchangedAndDecideRefusal(t *testing.T) {
	w, node, f := openWrites(t)
	ctx := context.Background()
	p, _ := w.Begin(person, "write_note", &noteIn{Key: "k"}, false)
	out, res, err := servers.Write[countResult](ctx, w, p, func(pebble.Reader) (servers.Intent, error) { return servers.Intent{}, nil })
	if err != nil || out.Outcome != servers.Unchanged || out.OpID != "" || res != nil || out.Position != node.Position() {
		t.Fatalf("unchanged: %+v %+v %v", out, res, err)
	}
	_, _, err = servers.Write[countResult](ctx, w, p, func(pebble.Reader) (servers.Intent, error) {
		return servers.Intent{}, authority.Refuse(authority.Invalid, "key is no key")
	})
	refusal(t, err, authority.Invalid)
	if f.Appends() != 0 {
		t.Fatalf("%d appends for calls that wrote nothing", f.Appends())
	}
}

// WR-1: a write the projection has not shown yet answers pending with its
// position and a note, and no result.
func TestPending(t *testing.T) {
	w, _, f := openWrites(t)
	f.Hold()
	defer f.Release()
	call, _ := w.Begin(person, "write_note", &noteIn{Key: "k"}, false)
	out, res, err := servers.Write[countResult](context.Background(), w, call, count("k"))
	if err != nil || out.Outcome != state.Pending || out.Position == 0 || out.Note == "" || res != nil {
		t.Fatalf("pending: %+v %+v %v", out, res, err)
	}
}

// WR-2, WR-4, WR-6: the unknown outcome said for each kind of caller, in
// the kit's one place: a seat repeats the same call, an operator finishes
// with the op_id, a whole-value write repeats harmlessly, and where the
// ledger cannot vouch the caller looks first. What the tool adds rides
// along; nothing the write would have made is answered.
func TestUnknownOutcomeSentences(t *testing.T) {
	ctx := context.Background()
	unknown := func(t *testing.T, c authority.Caller, whole bool, faults func(*statetest.Faults), in servers.Intent) *authority.Refusal {
		t.Helper()
		w, _, f := openWrites(t)
		f.Set(faults)
		call, err := w.Begin(c, "write_note", &noteIn{Key: "k"}, whole)
		if err != nil {
			t.Fatal(err)
		}
		out, res, err := servers.Write[countResult](ctx, w, call, func(pebble.Reader) (servers.Intent, error) { return in, nil })
		r := refusal(t, err, authority.Unavailable)
		if out != (servers.WriteOut{}) || res != nil || r.Data["outcome"] != "unknown" || r.Data["op_id"] != string(call.ID) {
			t.Fatalf("answer %+v %+v, data %v", out, res, r.Data)
		}
		if !strings.Contains(r.Sentence, string(call.ID)) {
			t.Fatalf("the sentence names no operation: %q", r.Sentence)
		}
		return r
	}
	drop := func(f *statetest.Faults) { f.DropAcks = 1 }
	in := servers.Intent{Kind: "test.count", Payload: counterPayload{Key: "k"}, What: "the note k", IfUnknown: "If it landed it is note k. ", UnknownData: map[string]any{"key_if_written": "k"}}

	r := unknown(t, seat, false, drop, in)
	for _, want := range []string{"The note k may or may not have landed", "If it landed it is note k.", "exactly the same write_note call again"} {
		if !strings.Contains(r.Sentence, want) {
			t.Errorf("seat: %q lacks %q", r.Sentence, want)
		}
	}
	if r.Data["key_if_written"] != "k" {
		t.Errorf("seat: data %v", r.Data)
	}
	if r = unknown(t, person, false, drop, in); !strings.Contains(r.Sentence, "with op_id") {
		t.Errorf("operator: %q", r.Sentence)
	}
	if r = unknown(t, seat, true, drop, in); !strings.Contains(r.Sentence, "Repeating write_note is harmless") {
		t.Errorf("whole value: %q", r.Sentence)
	}
	custom := in
	custom.CannotTell = "Declare the labels first."
	if r := cannotTell(t, custom, seat, false); r.Sentence != "Declare the labels first." {
		t.Errorf("cannot tell, the tool's own sentence: %q", r.Sentence)
	}
	if r := cannotTell(t, in, seat, false); !strings.Contains(r.Sentence, "cannot tell whether the note k landed") || !strings.Contains(r.Sentence, "Look first (get_note)") {
		t.Errorf("cannot tell: %q", r.Sentence)
	}
	// WR-4 in a fleet: an operator may finish it through another node whose
	// ledger reaches back; a seat, which sends no op_id, is not told so, and
	// neither is anyone on a node alone.
	for _, tc := range []struct {
		c      authority.Caller
		shared bool
		want   bool
	}{{person, true, true}, {seat, true, false}, {person, false, false}} {
		r := cannotTell(t, custom, tc.c, tc.shared)
		if got := strings.Contains(r.Sentence, "through another node of the fleet") && strings.Contains(r.Sentence, "with op_id op_"); got != tc.want {
			t.Errorf("%s, shared %v: %q", tc.c.Kind, tc.shared, r.Sentence)
		}
	}
}

// cannotTell makes the ledger unable to vouch for a seat's call: its first
// append is hidden from this node, a later write passes the gap an hour
// later, and the repeat of the first call is answered.
func cannotTell(t *testing.T, in servers.Intent, c authority.Caller, shared bool) *authority.Refusal {
	t.Helper()
	ctx := context.Background()
	node, f := statetest.OpenFaulty(t, t.TempDir(), state.Options{Projectors: []state.Projector{counterProjector()}, Shared: shared})
	now := time.Now()
	clock := now
	w := servers.NewWrites(node, servers.WritesOptions{Look: "get_note", Now: func() time.Time { return clock }})
	f.Set(func(f *statetest.Faults) { f.Hide = 1 })
	call, _ := w.Begin(c, "write_note", &noteIn{Key: "k"}, false)
	if _, _, err := servers.Write[countResult](ctx, w, call, func(pebble.Reader) (servers.Intent, error) { return in, nil }); err == nil {
		t.Fatal("the hidden append answered")
	}
	clock = now.Add(time.Hour)
	later, _ := w.Begin(person, "write_note", &noteIn{Key: "later"}, false)
	if _, _, err := servers.Write[countResult](ctx, w, later, count("later")); err != nil {
		t.Fatal(err)
	}
	_, _, err := servers.Write[countResult](ctx, w, call, func(pebble.Reader) (servers.Intent, error) { return in, nil })
	return refusal(t, err, authority.Unavailable)
}

// WR-7: steps are written before the call's own write, each its own
// operation; a step whose outcome is unknown stops the call before its own
// write, and the same call again answers the step and makes the write once.
func TestStepsBeforeTheWrite(t *testing.T) {
	w, node, f := openWrites(t)
	ctx := context.Background()
	withStep := func(pebble.Reader) (servers.Intent, error) {
		in, _ := count("main")(nil)
		in.First = []servers.Step{{Name: "declare", Args: map[string]any{"x": 1}, Intent: servers.Intent{Kind: "test.count", Payload: counterPayload{Key: "step"}, What: "the declaration"}}}
		return in, nil
	}
	call, _ := w.Begin(seat, "write_note", &noteIn{Key: "main"}, false)
	f.Set(func(f *statetest.Faults) { f.DropAcks = 1 })
	_, _, err := servers.Write[countResult](ctx, w, call, withStep)
	r := refusal(t, err, authority.Unavailable)
	if !strings.Contains(r.Sentence, "The declaration may or may not have landed") || r.Data["op_id"] != string(call.ID) {
		t.Fatalf("a step's unknown outcome: %q %v", r.Sentence, r.Data)
	}
	// The step did land; once this node shows it, the call's own write is
	// still not made.
	last, err := f.Log.Last(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if got := counts(t, node); got["main"] != 0 || got["step"] != 1 {
		t.Fatalf("after the stopped call: %v", got)
	}
	out, res, err := servers.Write[countResult](ctx, w, call, withStep)
	if err != nil || out.Outcome != state.Applied || res.Key != "main" {
		t.Fatalf("the same call again: %+v %+v %v", out, res, err)
	}
	if got := counts(t, node); got["main"] != 1 || got["step"] != 1 {
		t.Fatalf("after the repeat: %v", got)
	}
}

func counts(t *testing.T, n *state.Node) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := n.View(func(r pebble.Reader) error {
		for _, k := range []string{"main", "step"} {
			if v, closer, err := r.Get([]byte("count/" + k)); err == nil {
				out[k] = int(v[0])
				closer.Close()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A server with no state node refuses every write and read unavailable,
// naming itself.
func TestNoNode(t *testing.T) {
	w := servers.NewWrites(nil, servers.WritesOptions{Server: "the test server"})
	call, err := w.Begin(person, "write_note", &noteIn{Key: "k"}, false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = servers.Write[countResult](context.Background(), w, call, count("k"))
	if r := refusal(t, err, authority.Unavailable); !strings.Contains(r.Sentence, "The test server has no state node") {
		t.Fatalf("%q", r.Sentence)
	}
	refusal(t, w.View(func(pebble.Reader) error { return nil }), authority.Unavailable)
}
