package state

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/conc"
)

// holdGroup makes the log's group look busy with a group in flight, so
// appends queue behind it. The returned release waits until n appends are
// queued, runs then (if not nil) and hands them the lead, as a finished
// append would.
func holdGroup(t *testing.T, l *JetStreamLog) (release func(n int, then func())) {
	t.Helper()
	g := l.group
	if g == nil {
		t.Fatal("a single node's log groups its appends")
	}
	g.mu.Lock()
	g.busy = true
	g.mu.Unlock()
	return func(n int, then func()) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			if len(g.waiting) == n {
				if then != nil {
					then()
				}
				g.waiting[0].done <- groupedResult{lead: true}
				g.mu.Unlock()
				return
			}
			queued := len(g.waiting)
			g.mu.Unlock()
			if time.Now().After(deadline) {
				t.Fatalf("%d appends queued, want %d", queued, n)
			}
			time.Sleep(time.Millisecond) // polling the queue, with a deadline
		}
	}
}

func openLog(t *testing.T) *JetStreamLog {
	t.Helper()
	return openLogIn(t, t.TempDir())
}

// entries reads the log's first n entries.
func entries(t *testing.T, l *JetStreamLog, n int) map[uint64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[uint64]string{}
	done := errors.New("read enough")
	err := l.Follow(ctx, 1, func(e Entry) error {
		got[e.Position] = string(e.Data)
		if len(got) == n {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatalf("reading the log: %v (read %d of %d)", err, len(got), n)
	}
	return got
}

type appended struct {
	pos uint64
	err error
}

// appendAll appends msgs at once, each from its own goroutine, and answers
// each one's outcome.
func appendAll(ctxs []context.Context, l *JetStreamLog, msgs []Message) []appended {
	out := make([]appended, len(msgs))
	var wg conc.WaitGroup
	for i, m := range msgs {
		wg.Go(func() {
			pos, err := l.Append(ctxs[i], []Message{m})
			if err == nil && len(pos) != 1 {
				err = fmt.Errorf("%d positions for one message", len(pos))
			}
			if err == nil {
				out[i].pos = pos[0]
			}
			out[i].err = err
		})
	}
	wg.Wait()
	return out
}

func messages(n int, prefix string) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{ID: fmt.Sprintf("%s-%d", prefix, i), Data: []byte(fmt.Sprintf("%s data %d", prefix, i))}
	}
	return msgs
}

func background(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = context.Background()
	}
	return ctxs
}

// Appends that queue behind one in flight go as one group, made durable
// with one journal write, each message at a position of its own holding
// exactly its bytes.
func TestAppendsArrivingTogetherShareAJournalWrite(t *testing.T) {
	l := openLog(t)
	before := l.journal.writes.Load()
	release := holdGroup(t, l)
	const n = 40
	msgs := messages(n, "op")
	res := make(chan []appended, 1)
	go func() { res <- appendAll(background(n), l, msgs) }()
	release(n, nil)
	out := <-res
	if got := l.journal.writes.Load() - before; got != 1 {
		t.Fatalf("%d journal writes, want the %d appends made durable as one", got, n)
	}
	stored := entries(t, l, n)
	var positions []int
	for i, a := range out {
		if a.err != nil {
			t.Fatalf("append %d: %v", i, a.err)
		}
		if stored[a.pos] != string(msgs[i].Data) {
			t.Fatalf("append %d answered position %d, which holds %q", i, a.pos, stored[a.pos])
		}
		positions = append(positions, int(a.pos))
	}
	sort.Ints(positions)
	for i, p := range positions {
		if p != i+1 {
			t.Fatalf("positions %v, want 1..%d each once", positions, n)
		}
	}
	if got := l.journal.position(); got != n {
		t.Fatalf("the journal holds up to %d, want %d", got, n)
	}
	// Each message kept its own id in the duplicate window.
	again, err := l.Append(context.Background(), []Message{{ID: msgs[7].ID, Data: []byte("again")}})
	if err != nil || again[0] != out[7].pos {
		t.Fatalf("the same id again: %v %v, want position %d", again, err, out[7].pos)
	}
}

// An id the log already holds, appended again in a group, is answered
// with the position it has, and nothing is stored or journaled twice.
func TestGroupWithARepeatedIDAnswersItsPosition(t *testing.T) {
	l := openLog(t)
	first, err := l.Append(context.Background(), []Message{{ID: "op-dup", Data: []byte("first")}})
	if err != nil {
		t.Fatal(err)
	}
	release := holdGroup(t, l)
	const n = 30
	msgs := messages(n, "op")
	msgs[12] = Message{ID: "op-dup", Data: []byte("second")}
	res := make(chan []appended, 1)
	go func() { res <- appendAll(background(n), l, msgs) }()
	release(n, nil)
	out := <-res
	if out[12].err != nil || out[12].pos != first[0] {
		t.Fatalf("the repeated id: %+v, want position %d", out[12], first[0])
	}
	stored := entries(t, l, n) // the first append and the 29 new ones
	if _, extra := stored[uint64(n+1)]; extra {
		t.Fatal("the repeated id was stored again")
	}
	for i, a := range out {
		if i == 12 {
			continue
		}
		if a.err != nil || stored[a.pos] != string(msgs[i].Data) {
			t.Fatalf("append %d: %+v holds %q", i, a, stored[a.pos])
		}
	}
	if got := l.journal.position(); got != n {
		t.Fatalf("the journal holds up to %d, want %d", got, n)
	}
}

// A caller that gave up while queued is told nothing was appended, and
// nothing of its is; the rest of its group is stored.
func TestQueuedCallerThatLeftIsNotAppended(t *testing.T) {
	l := openLog(t)
	release := holdGroup(t, l)
	const n = 30
	msgs := messages(n, "op")
	ctxs := background(n)
	leaving, leave := context.WithCancel(context.Background())
	ctxs[3] = leaving
	res := make(chan []appended, 1)
	go func() { res <- appendAll(ctxs, l, msgs) }()
	release(n, leave)
	out := <-res
	if !errors.Is(out[3].err, ErrNotAppended) {
		t.Fatalf("the caller that left: %+v, want nothing appended", out[3])
	}
	stored := entries(t, l, n-1)
	for _, data := range stored {
		if data == string(msgs[3].Data) {
			t.Fatal("the message of the caller that left was stored")
		}
	}
}

// Appends queued when the log closes are told nothing was appended, and
// the log holds none of them.
func TestQueuedAppendsWhenTheLogClosesAreNotAppended(t *testing.T) {
	l := openLog(t)
	release := holdGroup(t, l)
	const n = 30
	res := make(chan []appended, 1)
	go func() { res <- appendAll(background(n), l, messages(n, "op")) }()
	release(n, func() { _ = l.Close() })
	for i, a := range <-res {
		if !errors.Is(a.err, ErrNotAppended) {
			t.Fatalf("append %d after the log closed: %+v, want nothing appended", i, a)
		}
	}
	if l.journal.position() != 0 {
		t.Fatal("a closed log journaled appends")
	}
}

// A group the server stored but the journal could not make durable is not
// said to be unappended (the node answers such a write unknown), and the
// follower does not read it until it is durable. The next journal write
// reads the missing entries back from the stream first, so nothing stored
// is left out of the journal, and nothing answered is left undurable.
func TestGroupTheJournalFailedIsUnknownThenJournaled(t *testing.T) {
	l := openLog(t)
	if _, err := l.Append(context.Background(), messages(1, "before")); err != nil {
		t.Fatal(err)
	}
	// The segment's file closed under the journal: its next write fails
	// as a write to a lost disk would.
	_ = l.journal.f.Close()
	release := holdGroup(t, l)
	const n = 5
	res := make(chan []appended, 1)
	go func() { res <- appendAll(background(n), l, messages(n, "lost")) }()
	release(n, nil)
	for i, a := range <-res {
		if a.err == nil || errors.Is(a.err, ErrNotAppended) || errors.Is(a.err, ErrLogClosed) {
			t.Fatalf("append %d of a group the journal failed: %+v, want an unknown outcome", i, a)
		}
	}
	if got := l.journal.position(); got != 1 {
		t.Fatalf("the journal holds up to %d after its write failed, want 1", got)
	}
	// Not durable, so not read.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	var read []uint64
	err := l.Follow(ctx, 1, func(e Entry) error { read = append(read, e.Position); return nil })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || len(read) != 1 {
		t.Fatalf("the follower read %v (%v), want only position 1 until the rest is durable", read, err)
	}
	// The same operation sent again is answered with the position it was
	// stored at, which is made durable before that answer.
	lost := messages(n, "lost")
	again, err := l.Append(context.Background(), []Message{lost[2]})
	if err != nil {
		t.Fatalf("a lost append sent again: %v", err)
	}
	if m, err := l.stream.GetMsg(context.Background(), again[0]); err != nil || string(m.Data) != string(lost[2].Data) {
		t.Fatalf("the append sent again was answered %d, which does not hold it (%v)", again[0], err)
	}
	if got := l.journal.position(); got != again[0] {
		t.Fatalf("the journal holds up to %d after answering position %d", got, again[0])
	}
	after, err := l.Append(context.Background(), messages(1, "after"))
	if err != nil || after[0] != n+2 {
		t.Fatalf("the next append: %v %v, want position %d", after, err, n+2)
	}
	if got := l.journal.position(); got != n+2 {
		t.Fatalf("the journal holds up to %d, want %d", got, n+2)
	}
	if got := entries(t, l, n+2); len(got) != n+2 {
		t.Fatalf("read %d entries, want %d", len(got), n+2)
	}
}

// Several messages in one Append are stored in order; when one after the
// first is refused, the error does not say nothing was appended, because
// the ones before it were.
func TestAppendOfSeveralMessages(t *testing.T) {
	l := openLog(t)
	msgs := messages(3, "several")
	pos, err := l.Append(context.Background(), msgs)
	if err != nil || len(pos) != 3 || pos[0] != 1 || pos[1] != 2 || pos[2] != 3 {
		t.Fatalf("three messages: %v %v, want positions 1, 2, 3", pos, err)
	}
	tooBig := Message{ID: "too-big", Data: make([]byte, 9<<20)} // past the connection's payload limit
	_, err = l.Append(context.Background(), []Message{{ID: "fits", Data: []byte("fits")}, tooBig})
	if err == nil || errors.Is(err, ErrNotAppended) || !strings.Contains(err.Error(), "1 of 2 messages were appended") {
		t.Fatalf("a second message refused: %v, want one of two appended, not nothing appended", err)
	}
	_, err = l.Append(context.Background(), []Message{tooBig})
	if !errors.Is(err, ErrNotAppended) {
		t.Fatalf("a first message refused: %v, want nothing appended", err)
	}
	if got := entries(t, l, 4); got[4] != "fits" {
		t.Fatalf("position 4 holds %q, want the message that fitted", got[4])
	}
}

// A group the server stored as the log was closing, whose journal write
// therefore never happened, is told the log closed, never that nothing was
// appended (which the node would report as safe to retry): the node
// answers such a write unknown. The journal is closed as Close closes it,
// between the server's acknowledgement and the journal write.
func TestGroupStoredAsTheLogClosesIsNotSaidUnappended(t *testing.T) {
	l := openLog(t)
	l.journal.close()
	pos, err := l.Append(context.Background(), messages(1, "cut"))
	if !errors.Is(err, ErrLogClosed) || errors.Is(err, ErrNotAppended) {
		t.Fatalf("an append stored but not journaled: %v %v, want the log closed and not nothing appended", pos, err)
	}
	if last, err := l.Last(context.Background()); err != nil || last != 1 {
		t.Fatalf("the stream ends at %d (%v), want the message stored at 1", last, err)
	}
}
