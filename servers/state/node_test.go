package state

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/nats-io/nats.go/jetstream"
)

// WR-1, WR-3: a write answers applied with its position, and the very next
// read on this node sees it.
func TestWriteThenRead(t *testing.T) {
	n := openNode(t, t.TempDir())
	a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k1", Value: "hello"}))
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if a.Outcome != Applied || a.Position != 1 || !a.OpID.Valid() {
		t.Fatalf("answer %+v, want applied at 1 with an op_id", a)
	}
	if n.Position() < a.Position {
		t.Fatalf("projection at %d, write at %d", n.Position(), a.Position)
	}
	if v, writes, ok := readNote(t, n, "k1"); !ok || v != "hello" || writes != 1 {
		t.Fatalf("read %q (%d writes, found %v)", v, writes, ok)
	}
	var res map[string]any
	if err := json.Unmarshal(a.Result, &res); err != nil || res["key"] != "k1" || res["by"] != "ada" {
		t.Fatalf("result %s (%v)", a.Result, err)
	}
}

// WR-5: the same operation sent twice lands once and answers the same.
func TestSameOperationLandsOnce(t *testing.T) {
	n := openNode(t, t.TempDir())
	op := noteOp("write_note", notePayload{Key: "k", Value: "v"})
	op.ID = NewOpID(op.Tool, op.Args)
	first, err := n.Write(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.Write(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	if first.Outcome != again.Outcome || first.Position != again.Position || first.OpID != again.OpID || string(first.Result) != string(again.Result) {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	if got := logMsgs(t, n); got != 1 {
		t.Fatalf("the log holds %d entries, want 1", got)
	}
	if _, writes, _ := readNote(t, n, "k"); writes != 1 {
		t.Fatalf("%d effects, want 1", writes)
	}

	// Arguments spelled differently (key order, whitespace) are the same call.
	op.Args = json.RawMessage(`{ "value":"v",  "key":"k" }`)
	if a, err := n.Write(context.Background(), op); err != nil || a.Position != first.Position {
		t.Fatalf("respelled arguments: %+v, %v", a, err)
	}

	// A seat's call derived from its turn is the same operation on re-run.
	t0 := time.Now()
	d1 := DeriveOpID("turn-7", t0, "write_note", json.RawMessage(`{"key":"d","value":"1"}`))
	d2 := DeriveOpID("turn-7", t0, "write_note", json.RawMessage(`{"value":"1","key":"d"}`))
	if d1 != d2 || !d1.Matches("write_note", json.RawMessage(`{"key":"d","value":"1"}`)) {
		t.Fatalf("derived ids %s, %s", d1, d2)
	}
	if DeriveOpID("turn-8", t0, "write_note", json.RawMessage(`{"key":"d","value":"1"}`)) == d1 {
		t.Fatal("another turn derived the same op_id")
	}
}

// OPS-5: an op_id brought back with other arguments or to another tool is
// refused invalid, and nothing reaches the log. WR-5: a reworded call is a
// new operation.
func TestOpIDBoundToItsCall(t *testing.T) {
	n := openNode(t, t.TempDir())
	op := noteOp("write_note", notePayload{Key: "k", Value: "v"})
	a, err := n.Write(context.Background(), op)
	if err != nil {
		t.Fatal(err)
	}
	before := logMsgs(t, n)

	other := noteOp("write_note", notePayload{Key: "k", Value: "other"})
	other.ID = a.OpID
	_, err = n.Write(context.Background(), other)
	r := asRefusal(t, err, authority.Invalid)
	mustContain(t, r.Sentence, string(a.OpID), "nothing was written")

	tool := noteOp("erase_note", notePayload{Key: "k", Value: "v"})
	tool.ID = a.OpID
	_, err = n.Write(context.Background(), tool)
	asRefusal(t, err, authority.Invalid)

	junk := op
	junk.ID = "op_not-an-id"
	_, err = n.Write(context.Background(), junk)
	asRefusal(t, err, authority.Invalid)

	// An op_id never answered, minted for another call, is refused too: the
	// digest alone says it is not this call's.
	fresh := noteOp("write_note", notePayload{Key: "z"})
	fresh.ID = NewOpID("write_note", json.RawMessage(`{"key":"y"}`))
	_, err = n.Write(context.Background(), fresh)
	asRefusal(t, err, authority.Invalid)

	if after := logMsgs(t, n); after != before {
		t.Fatalf("log grew from %d to %d entries on refused calls", before, after)
	}

	// Reworded, without the op_id: a new operation.
	re, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k", Value: "other"}))
	if err != nil || re.OpID == a.OpID || re.Position == a.Position {
		t.Fatalf("reworded call answered %+v (%v)", re, err)
	}
	if v, writes, _ := readNote(t, n, "k"); v != "other" || writes != 2 {
		t.Fatalf("after the reworded call: %q, %d writes", v, writes)
	}
}

// A caller already gone before the append is refused with nothing written;
// the same call afterwards lands once.
func TestContextEndedBeforeAppend(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	op := noteOp("write_note", notePayload{Key: "c", Value: "v"})
	op.ID = NewOpID(op.Tool, op.Args)
	a, err := n.Write(ctx, op)
	asRefusal(t, err, authority.Unavailable)
	if a.Position != 0 || a.Outcome != "" || logMsgs(t, n) != 0 {
		t.Fatalf("answer %+v, log %d", a, logMsgs(t, n))
	}
	again, err := n.Write(context.Background(), op)
	if err != nil || again.Outcome != Applied {
		t.Fatalf("repeat: %+v %v", again, err)
	}
	if _, writes, _ := readNote(t, n, "c"); writes != 1 {
		t.Fatalf("%d effects", writes)
	}
}

// A projector's refusal, error or panic becomes the operation's answer,
// its writes are thrown away, and the operations after it still apply.
func TestProjectorFailureRecorded(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()

	refused := noteOp("write_note", notePayload{Key: "bad", Value: "x", Refuse: true})
	a, err := n.Write(ctx, refused)
	r := asRefusal(t, err, authority.Invalid)
	mustContain(t, r.Sentence, "refused on purpose")
	if a.Outcome != Applied || a.Position == 0 || a.Refusal == nil {
		t.Fatalf("answer %+v: the refusal is what the operation landed as", a)
	}
	if _, _, found := readNote(t, n, "bad"); found {
		t.Fatal("a refused operation's writes were committed")
	}
	// Asked again, it answers the same refusal without a new entry.
	refused.ID = a.OpID
	before := logMsgs(t, n)
	_, err2 := n.Write(ctx, refused)
	if r2 := asRefusal(t, err2, authority.Invalid); r2.Sentence != r.Sentence || logMsgs(t, n) != before {
		t.Fatalf("repeat answered %v", err2)
	}

	for _, pl := range []notePayload{
		{Key: "panics", Panic: true},
		{Key: "fails", Fail: true},
		{Key: "reserved", Reserved: true},
	} {
		_, err := n.Write(ctx, noteOp("write_note", pl))
		r := asRefusal(t, err, authority.InternalError)
		if r.Sentence != authority.InternalErrorSentence {
			t.Fatalf("%s: sentence %q", pl.Key, r.Sentence)
		}
		if _, _, found := readNote(t, n, pl.Key); found {
			t.Fatalf("%s: writes were committed", pl.Key)
		}
	}

	ok, err := n.Write(ctx, noteOp("write_note", notePayload{Key: "after", Value: "fine"}))
	if err != nil || ok.Outcome != Applied {
		t.Fatalf("the log is wedged: %+v %v", ok, err)
	}
	if v, _, _ := readNote(t, n, "after"); v != "fine" {
		t.Fatalf("read %q", v)
	}
}

// A projector's keys may start anywhere from "\x01" on (everything below
// is the node's own), and a projector may answer no result at all.
func TestProjectorKeyRangeAndEmptyResult(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()
	a, err := n.Write(ctx, noteOp("write_note", notePayload{Key: "lowest", Value: "v", Raw: "\x01"}))
	if err != nil || a.Refusal != nil {
		t.Fatalf("a key at the bottom of the projector's range: %+v %v", a, err)
	}
	_, err = n.Write(ctx, noteOp("write_note", notePayload{Key: "below", Value: "v", Raw: "\x00\xff"}))
	asRefusal(t, err, authority.InternalError)
	a, err = n.Write(ctx, noteOp("write_note", notePayload{Key: "quiet", Value: "v", NoResult: true}))
	if err != nil || a.Outcome != Applied || a.Refusal != nil || a.Result != nil {
		t.Fatalf("a projector answering no result: %+v %v", a, err)
	}
	if v, _, _ := readNote(t, n, "quiet"); v != "v" {
		t.Fatalf("its writes: %q", v)
	}
}

// A write returns once its own position is applied, not once every write
// queued beside it is: the waiters are woken lowest position first.
func TestWriteReturnsWhenItsOwnPositionApplies(t *testing.T) {
	gate := make(chan struct{})
	n := openNode(t, t.TempDir(), func(o *Options) {
		o.Projectors = []Projector{notes{gate: gate}}
		o.ProjectionWait = 5 * time.Second
	})
	// Registered after the node's own cleanup, so run before it: a failing
	// test must not leave the projection stuck at the gate.
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	answers := make(chan Answer, 2)
	write := func(key string) {
		a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: key, Value: "v"}))
		if err != nil {
			t.Error(err)
		}
		answers <- a
	}
	go write("first")
	waitWaiters(t, n, 1)
	go write("second")
	waitWaiters(t, n, 2)
	gate <- struct{}{} // the projection applies position 1 only
	if a := <-answers; a.Outcome != Applied || a.Position != 1 {
		t.Fatalf("the write at position 1 answered %+v once it was applied", a)
	}
	open()
	if a := <-answers; a.Outcome != Applied || a.Position != 2 {
		t.Fatalf("the write at position 2: %+v", a)
	}
}

// waitWaiters waits until n writes wait for the projection.
func waitWaiters(t *testing.T, n *Node, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n.mu.Lock()
		got := n.waiters.Len()
		n.mu.Unlock()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes wait for the projection, want %d", got, want)
		}
		time.Sleep(time.Millisecond) // polling the waiters, with a deadline
	}
}

// An operation minted before others landed, and sent after them (a slower
// caller), lands: only a gap in the log moves the ledger's horizon.
func TestOperationMintedBeforeLaterWritesLands(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()
	slow := noteOp("write_note", notePayload{Key: "slow", Value: "v"})
	slow.ID = DeriveOpID("test", time.Now().Add(-time.Minute), slow.Tool, slow.Args)
	for _, k := range []string{"a", "b"} {
		if _, err := n.Write(ctx, noteOp("write_note", notePayload{Key: k, Value: "v"})); err != nil {
			t.Fatal(err)
		}
	}
	a, err := n.Write(ctx, slow)
	if err != nil || a.Outcome != Applied {
		t.Fatalf("answer %+v %v", a, err)
	}
}

// A write the projection has not reached within ProjectionWait answers
// pending with the position it is durable at; the ledger later vouches for
// it as applied.
func TestPendingWhenProjectionLags(t *testing.T) {
	gate := make(chan struct{})
	n := openNode(t, t.TempDir(), func(o *Options) {
		o.Projectors = []Projector{notes{gate: gate}}
		o.ProjectionWait = 50 * time.Millisecond
	})
	a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "slow", Value: "v"}))
	if err != nil || a.Outcome != Pending || a.Position != 1 {
		t.Fatalf("answer %+v, %v; want pending at 1", a, err)
	}
	close(gate)
	if err := n.WaitFor(context.Background(), a.Position); err != nil {
		t.Fatal(err)
	}
	got, ok := n.Vouches(a.OpID)
	if !ok || got.Outcome != Applied || got.Position != 1 {
		t.Fatalf("Vouches: %+v %v", got, ok)
	}
}

// WR-4: once the log has lost history, the ledger cannot vouch for an
// operation minted before the loss; writing it again publishes nothing and
// says the node cannot tell.
func TestLedgerCannotVouchPastItsHorizon(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	ctx := context.Background()
	// Ids minted at stated instants, well before the write that will be the
	// first after the loss (stamped now), so no clock has to tick between.
	minted := time.Now().Add(-time.Minute)
	old := noteOp("write_note", notePayload{Key: "old", Value: "v"})
	old.ID = DeriveOpID("test", minted, old.Tool, old.Args)
	if _, err := n.Write(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Write(ctx, noteOp("write_note", notePayload{Key: "k2", Value: "v"})); err != nil {
		t.Fatal(err)
	}
	// Minted before the loss, never written.
	never := noteOp("write_note", notePayload{Key: "never", Value: "v"})
	never.ID = DeriveOpID("test", minted.Add(time.Second), never.Tool, never.Args)
	// The first write after the loss is stamped at a stated instant too:
	// the horizon is when it was asked for, not when the gap was found.
	k3 := noteOp("write_note", notePayload{Key: "k3", Value: "v"})
	k3.At = minted.Add(30 * time.Second).UTC()
	last, err := n.Write(ctx, k3)
	if err != nil {
		t.Fatal(err)
	}
	// The log loses its first two entries; the projection is rebuilt from
	// what is left.
	if err := jsOf(n).stream.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "projection")); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir)
	if n.Position() != last.Position {
		t.Fatalf("rebuilt to %d, want %d", n.Position(), last.Position)
	}
	if _, ok := n.Vouches(old.ID); ok {
		t.Fatal("the ledger vouches for an operation from the lost part of the log")
	}
	// The first operation after the gap is projected like any other: the
	// horizon the gap moves is the node's own write, not the projector's.
	if a, ok := n.Vouches(last.OpID); !ok || a.Outcome != Applied || a.Refusal != nil {
		t.Fatalf("Vouches(last) = %+v, %v", a, ok)
	}
	if _, writes, _ := readNote(t, n, "k3"); writes != 1 {
		t.Fatalf("the first write after the gap was not projected (%d writes)", writes)
	}
	if a, ok := n.Vouches(NewOpID("t", nil)); !ok || a.Outcome != "" {
		t.Fatalf("a fresh op_id: %+v, %v; want vouched as not landed", a, ok)
	}
	// Minted at the horizon's very millisecond or after it: vouched for.
	for _, at := range []time.Time{k3.At, k3.At.Add(10 * time.Second)} {
		id := DeriveOpID("test", at, "write_note", nil)
		if a, ok := n.Vouches(id); !ok || a.Outcome != "" {
			t.Fatalf("an op_id minted at %v, horizon %v: %+v, %v; want vouched as not landed", at, k3.At, a, ok)
		}
	}
	before := logMsgs(t, n)
	a, err := n.Write(ctx, never)
	asUnknown(t, err, never.ID, true)
	if a.Outcome != Unknown || a.Position != 0 || logMsgs(t, n) != before {
		t.Fatalf("answer %+v; log %d→%d", a, before, logMsgs(t, n))
	}
	// The horizon is kept with the projection: reopened, the node still
	// cannot vouch for what the lost part of the log may have held.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir)
	if _, ok := n.Vouches(old.ID); ok {
		t.Fatal("reopened, the ledger vouches for an operation from the lost part of the log")
	}
}

// Deleting the projection rebuilds it from the log: same data, same
// position, same ledger answers.
func TestProjectionRebuildsFromLog(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	var answers []Answer
	for i := range 50 {
		a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k" + string(rune('a'+i%26)), Value: "v"}))
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
	}
	pos := n.Position()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "projection")); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir)
	if n.Position() != pos {
		t.Fatalf("rebuilt to %d, want %d", n.Position(), pos)
	}
	for _, a := range answers {
		got, ok := n.Vouches(a.OpID)
		if !ok || got.Position != a.Position || string(got.Result) != string(a.Result) {
			t.Fatalf("after rebuild %s answers %+v, before %+v", a.OpID, got, a)
		}
	}
	if _, writes, _ := readNote(t, n, "ka"); writes != 2 {
		t.Fatalf("ka written %d times, want 2", writes)
	}
}

// Concurrent writers all land, each once, in one total order.
func TestConcurrentWriters(t *testing.T) {
	n := openNode(t, t.TempDir())
	var wg sync.WaitGroup
	seen := make(chan uint64, 400)
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: string(rune('A'+w)) + string(rune('a'+i%26)) + string(rune('0'+i/26)), Value: "v"}))
				if err != nil || a.Outcome != Applied {
					t.Errorf("write: %+v %v", a, err)
					return
				}
				seen <- a.Position
			}
		})
	}
	wg.Wait()
	close(seen)
	positions := map[uint64]bool{}
	for p := range seen {
		if positions[p] {
			t.Fatalf("position %d answered twice", p)
		}
		positions[p] = true
	}
	if len(positions) != 400 || n.Position() != 400 || ledgerRows(t, n) != 400 {
		t.Fatalf("%d positions, projection at %d, %d ledger rows", len(positions), n.Position(), ledgerRows(t, n))
	}
}

// Close twice; calls after Close are refused unavailable; nothing leaks
// (TestMain checks goroutines).
func TestCloseTwice(t *testing.T) {
	n, err := Open(context.Background(), Options{Projectors: []Projector{notes{}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := n.opts.Dir
	if _, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k", Value: "v"})); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k", Value: "v"}))
	asRefusal(t, err, authority.Unavailable)
	asRefusal(t, n.View(func(r pebbleReader) error { return nil }), authority.Unavailable)
	if _, ok := n.Vouches(NewOpID("t", nil)); ok {
		t.Fatal("a closed node vouches")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the ephemeral directory is still there: %v", err)
	}
}

// A write in flight when the node closes gets an answer, not a hang.
func TestCloseDuringWrites(t *testing.T) {
	n := openNode(t, t.TempDir())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				a, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "x", Value: "v"}))
				if err != nil {
					if a.Outcome == Applied && a.Refusal == nil {
						t.Errorf("applied with an error: %v", err)
					}
					return
				}
			}
		})
	}
	// Close once writes are flowing: some have landed, more are in flight.
	if err := n.WaitFor(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// Reads classify failures: a refusal passes through, anything else is the
// node's own fault.
func TestViewClassifiesErrors(t *testing.T) {
	n := openNode(t, t.TempDir())
	nf := authority.Refuse(authority.NotFound, "no such note")
	if err := n.View(func(pebbleReader) error { return nf }); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("refusal became %v", err)
	}
	err := n.View(func(pebbleReader) error { return errors.New("disk on fire") })
	if r := asRefusal(t, err, authority.InternalError); r.Sentence != authority.InternalErrorSentence {
		t.Fatalf("sentence %q", r.Sentence)
	}
}

// Writes of a kind no projector applies are the node's own fault.
func TestUnknownKind(t *testing.T) {
	n := openNode(t, t.TempDir())
	op := noteOp("write_note", notePayload{Key: "k"})
	op.Kind = "nobody"
	_, err := n.Write(context.Background(), op)
	asRefusal(t, err, authority.InternalError)
	if logMsgs(t, n) != 0 {
		t.Fatal("appended an operation nobody can apply")
	}
}

// A projection that is ahead of its log is refused at Open rather than
// silently rebuilt smaller.
func TestProjectionAheadOfLog(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	if _, err := n.Write(context.Background(), noteOp("write_note", notePayload{Key: "k", Value: "v"})); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "log")); err != nil {
		t.Fatal(err)
	}
	if n, err := Open(context.Background(), Options{Dir: dir, Projectors: []Projector{notes{}}}); err == nil {
		n.Close()
		t.Fatal("opened a projection ahead of its log")
	}
}

// WaitFor gives up with its context and leaves no waiter behind.
func TestWaitForContext(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := n.WaitFor(ctx, 1000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor: %v", err)
	}
	n.mu.Lock()
	left := n.waiters.Len()
	n.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiters left", left)
	}
}

// WR-5: a turn's first write records when the turn began, whether that
// operation landed or was refused, so a retried turn mints the same op_ids;
// later writes of the turn do not move it, and a rebuilt projection holds it
// again.
func TestTurnStartRecorded(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	ctx := context.Background()
	if _, ok := n.TurnStart("turn-a"); ok {
		t.Fatal("a turn that never wrote has a start")
	}
	start := time.UnixMilli(1_700_000_000_123)
	op := noteOp("write_note", notePayload{Key: "k", Refuse: true})
	op.Caller.TurnKey, op.TurnStart = "turn-a", start
	if _, err := n.Write(ctx, op); err == nil {
		t.Fatal("the refusing projector's op was not refused")
	}
	later := noteOp("write_note", notePayload{Key: "k2", Value: "v"})
	later.Caller.TurnKey, later.TurnStart = "turn-a", start.Add(time.Hour)
	if _, err := n.Write(ctx, later); err != nil {
		t.Fatal(err)
	}
	if got, ok := n.TurnStart("turn-a"); !ok || !got.Equal(start) {
		t.Fatalf("TurnStart = %v, %v; want %v", got, ok, start)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "projection")); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir)
	if got, ok := n.TurnStart("turn-a"); !ok || !got.Equal(start) {
		t.Fatalf("after a rebuild TurnStart = %v, %v; want %v", got, ok, start)
	}
	if _, ok := n.TurnStart("turn-b"); ok {
		t.Fatal("another turn has a start")
	}
}

// OPS-6: the ledger tells which other call of an id's stem landed, and a
// keyed operation's scope records its start like a turn's.
func TestOtherCallAndScopeStart(t *testing.T) {
	n := openNode(t, t.TempDir())
	ctx := context.Background()
	at := time.Now().Truncate(time.Millisecond)
	op := noteOp("write_note", notePayload{Key: "k", Value: "v"})
	op.ID = KeyedOpID("scope-1", at, op.Tool, op.Args)
	op.Scope, op.TurnStart = "scope-1", at
	if _, ok, err := n.OtherCall(op.ID); ok || err != nil {
		t.Fatalf("before any write: %v %v", ok, err)
	}
	if _, err := n.Write(ctx, op); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := n.OtherCall(op.ID); ok || err != nil {
		t.Fatalf("the call itself is another call: %v %v", ok, err)
	}
	otherArgs := json.RawMessage(`{"key":"k","value":"w"}`)
	got, ok, err := n.OtherCall(KeyedOpID("scope-1", at, op.Tool, otherArgs))
	if !ok || err != nil || got != op.ID {
		t.Fatalf("another call under the key: %s %v %v", got, ok, err)
	}
	if _, ok, _ := n.OtherCall(KeyedOpID("scope-2", at, op.Tool, otherArgs)); ok {
		t.Fatal("another key's call is found")
	}
	if start, ok := n.TurnStart("scope-1"); !ok || !start.Equal(at) {
		t.Fatalf("the scope's start: %v %v", start, ok)
	}
}
