package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// reopen closes l and opens the log in dir again.
func reopen(t *testing.T, l *JetStreamLog, dir string) *JetStreamLog {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return openLogIn(t, dir)
}

// openLogIn opens the log in dir, closed when the test ends.
func openLogIn(t *testing.T, dir string) *JetStreamLog {
	t.Helper()
	l, err := OpenJetStream(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendN(t *testing.T, l *JetStreamLog, msgs []Message) {
	t.Helper()
	for _, m := range msgs {
		if _, err := l.Append(context.Background(), []Message{m}); err != nil {
			t.Fatal(err)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// A crash can take from the stream what the server had stored but not yet
// synced; the journal holds it. Here the stream's store goes back to a copy
// taken after the first 20 appends, as an OS crash would leave it, while
// the journal holds all 35: opened again, the log stores the last 15 again,
// each at its own position with its own bytes, and the duplicate window does
// not get in the way.
func TestJournalRestoresWhatTheStreamLost(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	first := messages(20, "first")
	appendN(t, l, first)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "jetstream")
	copyDir(t, filepath.Join(dir, "jetstream"), saved)
	l = openLogIn(t, dir)
	second := messages(15, "second")
	appendN(t, l, second)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, saved, filepath.Join(dir, "jetstream"))

	l = openLogIn(t, dir)
	want := append(first, second...)
	got := entries(t, l, len(want))
	for i, m := range want {
		if got[uint64(i+1)] != string(m.Data) {
			t.Fatalf("position %d holds %q, want %q", i+1, got[uint64(i+1)], m.Data)
		}
	}
	if last, err := l.Last(context.Background()); err != nil || last != uint64(len(want)) {
		t.Fatalf("the stream ends at %d (%v), want %d", last, err, len(want))
	}
	// The next append comes after them.
	pos, err := l.Append(context.Background(), messages(1, "third"))
	if err != nil || pos[0] != uint64(len(want)+1) {
		t.Fatalf("the next append: %v %v, want position %d", pos, err, len(want)+1)
	}
}

// segments lists the journal's segment files in order.
func segments(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "journal", "*"+journalExt))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// What the stream stored and the journal never got (a crash between the
// two) is journaled when the log opens, before any follower reads it.
func TestJournalTakesInWhatOnlyTheStreamHolds(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	msgs := messages(10, "op")
	appendN(t, l, msgs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Cut the last three records off the segment that holds them.
	segs := segments(t, dir)
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, _ := readSegment(b)
	if len(recs) != len(msgs) {
		t.Fatalf("the segment holds %d records, want %d", len(recs), len(msgs))
	}
	cut := len(b)
	for _, r := range recs[len(recs)-3:] {
		cut -= recordHead + 8 + len(r.data)
	}
	if err := os.Truncate(last, int64(cut)); err != nil {
		t.Fatal(err)
	}

	l = openLogIn(t, dir)
	if got := l.journal.position(); got != 10 {
		t.Fatalf("the journal holds up to %d after opening, want 10", got)
	}
	l = reopen(t, l, dir) // and it stays so: the records are in its files
	if got := l.journal.position(); got != 10 {
		t.Fatalf("the journal holds up to %d after opening again, want 10", got)
	}
	if got := entries(t, l, 10); got[10] != string(msgs[9].Data) {
		t.Fatalf("position 10 holds %q", got[10])
	}
}

// A journal that holds positions past the stream's end with a gap before
// them cannot be put back: the log refuses to open and says why, rather
// than store the entries at positions they did not have.
func TestJournalWithAGapPastTheStreamRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	appendN(t, l, messages(2, "op"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := binary.BigEndian.AppendUint64([]byte(journalMagic), 2)
	seg = appendRecord(seg, journalRecord{pos: 5, data: []byte("five")})
	if err := os.WriteFile(filepath.Join(dir, "journal", fmt.Sprintf("%020d%s", 999, journalExt)), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenJetStream(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "holds position 5 but the operation stream ends at 2") {
		t.Fatalf("opening: %v, want a refusal naming the gap", err)
	}
}

// A stream made before the journal (persisting each message itself) keeps
// its persist mode, which the server cannot change: such a log opens with
// no journal, and its appends are stored and fsynced one by one.
func TestStreamMadeBeforeTheJournalKeepsItsPersistMode(t *testing.T) {
	dir := t.TempDir()
	old := singleNode(dir)
	old.journal = ""
	l, err := openJetStream(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, messages(3, "old"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLogIn(t, dir)
	if l.journal != nil || l.group != nil {
		t.Fatal("a stream made before the journal was given one")
	}
	if info, err := l.stream.Info(context.Background()); err != nil || info.Config.PersistMode != jetstream.DefaultPersistMode {
		t.Fatalf("persist mode %v (%v), want the default", info.Config.PersistMode, err)
	}
	pos, err := l.Append(context.Background(), messages(1, "new"))
	if err != nil || pos[0] != 4 {
		t.Fatalf("append: %v %v, want position 4", pos, err)
	}
	if got := entries(t, l, 4); got[4] != "new data 0" {
		t.Fatalf("position 4 holds %q", got[4])
	}
}

// Segments stop growing and, once the server has long synced what they
// hold, are deleted; the journal still knows where it stands when it opens
// again: from the stream's end when no segment is left, and from a
// segment's header when the segment holds no record.
func TestJournalSegmentsRetireAndGo(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	l.journal.keep, l.journal.segmentAge, l.journal.segmentMin = 0, 0, 0
	appendN(t, l, messages(5, "op"))
	// Every write retired its segment and dropped it at once.
	if segs := segments(t, dir); len(segs) != 0 {
		t.Fatalf("%d segments left, want none: %v", len(segs), segs)
	}
	l = reopen(t, l, dir)
	if got := l.journal.position(); got != 5 {
		t.Fatalf("reopened with no segment, the journal holds up to %d, want 5", got)
	}
	if w := l.journal.writes.Load(); w != 0 {
		t.Fatalf("a journal with no segment began with %d writes, want none: it begins where the stream ends, not with a copy of it", w)
	}
	pos, err := l.Append(context.Background(), messages(1, "next"))
	if err != nil || pos[0] != 6 {
		t.Fatalf("append: %v %v, want position 6", pos, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The segment that write began, cut back to its header as a crash
	// right after the header would leave it.
	segs := segments(t, dir)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	if err := os.Truncate(segs[0], int64(len(journalMagic)+8)); err != nil {
		t.Fatal(err)
	}
	j, recs, fresh, err := openJournal(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	j.close()
	if fresh || len(recs) != 0 || j.last != 5 {
		t.Fatalf("from the header alone: fresh %v, %d records, at %d; want at 5", fresh, len(recs), j.last)
	}
	l = openLogIn(t, dir)
	if got := l.journal.position(); got != 6 {
		t.Fatalf("opened, the journal holds up to %d, want 6 read back from the stream", got)
	}
}

// A quiet journal does not begin a segment (a file and two fsyncs) for
// every write once its segment is old: only once it also holds enough.
func TestQuietJournalKeepsItsSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	l.journal.segmentAge = 0
	appendN(t, l, messages(5, "op"))
	if segs := segments(t, dir); len(segs) != 1 {
		t.Fatalf("%d segments for five small writes, want 1", len(segs))
	}
}

// A segment's records read back as written; a record cut short or with a
// wrong checksum ends the segment there, and what follows it is not read.
func TestReadSegment(t *testing.T) {
	seg := binary.BigEndian.AppendUint64([]byte(journalMagic), 7)
	var ends []int
	for i := range 3 {
		seg = appendRecord(seg, journalRecord{pos: uint64(8 + i), data: fmt.Appendf(nil, "data %d", i)})
		ends = append(ends, len(seg))
	}
	flipped := bytes.Clone(seg)
	flipped[ends[0]+recordHead+8] ^= 1 // the second record's data
	for _, tc := range []struct {
		name string
		b    []byte
		want int // records read
	}{
		{"whole", seg, 3},
		{"last cut short", seg[:len(seg)-1], 2},
		{"only a length left", seg[:ends[1]+3], 2},
		{"second corrupt", flipped, 1},
		{"header only", seg[:len(journalMagic)+8], 0},
		{"header cut short", seg[:5], 0},
		{"empty", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, recs, err := readSegment(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tc.want {
				t.Fatalf("%d records, want %d", len(recs), tc.want)
			}
			if len(tc.b) >= len(journalMagic)+8 && base != 7 {
				t.Fatalf("base %d, want 7", base)
			}
			for i, r := range recs {
				if r.pos != uint64(8+i) || string(r.data) != fmt.Sprintf("data %d", i) {
					t.Fatalf("record %d: %d %q", i, r.pos, r.data)
				}
			}
		})
	}
	if _, _, err := readSegment([]byte("something else entirely, not a journal")); err == nil {
		t.Fatal("a file that is not a segment was read as one")
	}
}
