package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
// two) needs no journal: opening syncs the stream's files, which hold it,
// and the journal begins past it.
func TestJournalBeginsPastWhatOnlyTheStreamHolds(t *testing.T) {
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
	_, _, recs, _ := readSegment(b)
	if len(recs) != len(msgs) {
		t.Fatalf("the segment holds %d records, want %d", len(recs), len(msgs))
	}
	cut := len(b)
	for _, r := range recs[len(recs)-3:] {
		cut -= recordHead + 12 + len(r.hdr) + len(r.data)
	}
	if err := os.Truncate(last, int64(cut)); err != nil {
		t.Fatal(err)
	}

	l = openLogIn(t, dir)
	if got := l.journal.position(); got != 10 {
		t.Fatalf("the journal holds up to %d after opening, want 10", got)
	}
	if segs := segments(t, dir); len(segs) != 0 {
		t.Fatalf("segments the synced stream covers were kept: %v", segs)
	}
	pos, err := l.Append(context.Background(), messages(1, "next"))
	if err != nil || pos[0] != 11 {
		t.Fatalf("the next append: %v %v, want position 11", pos, err)
	}
	if got := entries(t, l, 11); got[10] != string(msgs[9].Data) {
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

// openOldStream opens, in dir, a log whose stream is made as before the
// journal: persisting each message itself, with no journal beside it.
func openOldStream(t *testing.T, dir string) *JetStreamLog {
	t.Helper()
	old := singleNode(dir)
	old.journal = ""
	l, err := openJetStream(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// persistMode is the operation stream's persist mode.
func persistMode(t *testing.T, l *JetStreamLog) jetstream.PersistModeType {
	t.Helper()
	info, err := l.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.Config.PersistMode
}

// One rule for every data directory: a stream made before the journal
// (persisting each message itself, a mode the server cannot change) moves
// onto the journal when the log opens. Every entry keeps its position, its
// data and its op_id, the appends after it go in groups through the
// journal, and the next open finds the copy covered by the stream's synced
// files and deletes it.
func TestStreamMadeBeforeTheJournalMovesOntoIt(t *testing.T) {
	dir := t.TempDir()
	l := openOldStream(t, dir)
	msgs := messages(3, "old")
	appendN(t, l, msgs)
	if persistMode(t, l) != jetstream.DefaultPersistMode || l.journal != nil {
		t.Fatal("the old stream was not made as before the journal")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLogIn(t, dir)
	if l.journal == nil || l.group == nil || persistMode(t, l) != jetstream.AsyncPersistMode {
		t.Fatalf("a stream made before the journal did not move onto it (persist mode %v)", persistMode(t, l))
	}
	got := entries(t, l, 3)
	for i, m := range msgs {
		if got[uint64(i+1)] != string(m.Data) {
			t.Fatalf("position %d holds %q after the move, want %q", i+1, got[uint64(i+1)], m.Data)
		}
	}
	again, err := l.Append(context.Background(), []Message{{ID: msgs[1].ID, Data: []byte("again")}})
	if err != nil || again[0] != 2 {
		t.Fatalf("an op_id of the old stream appended again: %v %v, want position 2", again, err)
	}
	pos, err := l.Append(context.Background(), messages(1, "new"))
	if err != nil || pos[0] != 4 {
		t.Fatalf("append: %v %v, want position 4", pos, err)
	}
	l = reopen(t, l, dir)
	if segs := segments(t, dir); len(segs) != 0 {
		t.Fatalf("the copy of the old stream was kept once the stream's synced files held it: %v", segs)
	}
	if got := entries(t, l, 4); got[1] != string(msgs[0].Data) || got[4] != "new data 0" {
		t.Fatalf("after the move and a reopen: %v", got)
	}
}

// copyBegun writes the first n entries of l's stream to the journal in
// dir, as a move onto the journal that a crash cut short leaves it.
func copyBegun(t *testing.T, l *JetStreamLog, dir string, n uint64) {
	t.Helper()
	j, err := openJournal(filepath.Join(dir, "journal"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	var copied []journalRecord
	for pos := uint64(1); pos <= n; pos++ {
		m, err := l.stream.GetMsg(context.Background(), pos)
		if err != nil {
			t.Fatal(err)
		}
		copied = append(copied, journalRecord{pos: pos, hdr: appendHeader(nil, m.Header), data: m.Data})
	}
	if err := j.write(copied); err != nil {
		t.Fatal(err)
	}
}

// A move a crash cut short goes on where it stopped: here the journal
// holds the first two of five entries, as a crash during the copy leaves
// it; and where the old stream was already deleted, opening stores every
// entry again from the journal.
func TestMoveOntoTheJournalCutShortGoesOn(t *testing.T) {
	dir := t.TempDir()
	l := openOldStream(t, dir)
	msgs := messages(5, "old")
	appendN(t, l, msgs)
	copyBegun(t, l, dir, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLogIn(t, dir)
	if persistMode(t, l) != jetstream.AsyncPersistMode {
		t.Fatal("the move did not go on")
	}
	got := entries(t, l, 5)
	for i, m := range msgs {
		if got[uint64(i+1)] != string(m.Data) {
			t.Fatalf("position %d holds %q, want %q", i+1, got[uint64(i+1)], m.Data)
		}
	}
	if m, err := l.stream.GetMsg(context.Background(), 5); err != nil || m.Header.Get(jetstream.MsgIDHeader) != msgs[4].ID {
		t.Fatalf("position 5 after the move: %v %v, want its op_id %s", m, err, msgs[4].ID)
	}

	// The stream deleted, the journal holding every entry: a crash right
	// after the copy's delete.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	l = openLogIn(t, dir)
	if got := entries(t, l, 5); got[5] != string(msgs[4].Data) {
		t.Fatalf("position 5 holds %q, want %q", got[5], msgs[4].Data)
	}
}

// A stream that cannot be stored again position for position stays as it
// was made, fsynced by the server message by message: one with a deleted
// entry, and one holding an op_id twice (stored again inside the
// duplicate window, the second would be answered with the first's
// position). Nothing of a copy begun is left behind.
func TestStreamThatCannotMoveStays(t *testing.T) {
	t.Run("a deleted entry", func(t *testing.T) {
		dir := t.TempDir()
		l := openOldStream(t, dir)
		appendN(t, l, messages(3, "old"))
		if err := l.stream.DeleteMsg(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		l = reopen(t, l, dir)
		if l.journal != nil || persistMode(t, l) != jetstream.DefaultPersistMode {
			t.Fatal("a stream with a gap moved onto the journal")
		}
		if pos, err := l.Append(context.Background(), messages(1, "new")); err != nil || pos[0] != 4 {
			t.Fatalf("append: %v %v, want position 4", pos, err)
		}
	})
	t.Run("an op_id twice", func(t *testing.T) {
		dir := t.TempDir()
		l := openOldStream(t, dir)
		// A window short enough to outlive: the same op_id is stored
		// again once the server has forgotten it. (Set before anything
		// is stored: the server applies a new window to ids it already
		// holds only after rescheduling their expiry by the old one.)
		cfg := l.stream.CachedInfo().Config
		cfg.Duplicates = 100 * time.Millisecond
		if _, err := l.js.UpdateStream(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, messages(2, "old"))
		deadline := time.Now().Add(10 * time.Second)
		for {
			pos, err := l.Append(context.Background(), []Message{{ID: "old-0", Data: []byte("twice")}})
			if err != nil {
				t.Fatal(err)
			}
			if pos[0] != 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server never forgot the op_id")
			}
			time.Sleep(20 * time.Millisecond) // polling the server's window, with a deadline
		}
		last, err := l.Last(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		copyBegun(t, l, dir, 2)
		l = reopen(t, l, dir)
		if l.journal != nil || persistMode(t, l) != jetstream.DefaultPersistMode {
			t.Fatal("a stream holding an op_id twice moved onto the journal")
		}
		if segs := segments(t, dir); len(segs) != 0 {
			t.Fatalf("the copy begun was left behind: %v", segs)
		}
		if got := entries(t, l, int(last)); got[last] != "twice" {
			t.Fatalf("position %d holds %q", last, got[last])
		}
	})
}

// Segments stop growing and stay while the log runs; the next open, once
// it has synced the stream's files, deletes them. The journal still knows
// where it stands when it opens: from the stream's end when no segment is
// left, and from a segment's header when the segment holds no record.
func TestJournalSegmentsRetireAndGo(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	l.journal.segmentAge, l.journal.segmentMin = 0, 0
	appendN(t, l, messages(5, "op"))
	// Every write retired its segment, and none is known synced yet.
	if segs := segments(t, dir); len(segs) != 5 {
		t.Fatalf("%d segments while the log runs, want the 5 it wrote: %v", len(segs), segs)
	}
	l = reopen(t, l, dir)
	if segs := segments(t, dir); len(segs) != 0 {
		t.Fatalf("%d segments left after opening, want none: %v", len(segs), segs)
	}
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
	if err := os.Truncate(segs[0], int64(segmentHead)); err != nil {
		t.Fatal(err)
	}
	var recs []journalRecord
	j, err := openJournal(filepath.Join(dir, "journal"), 0, func(r journalRecord) error { recs = append(recs, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	j.close()
	if len(recs) != 0 || j.last != 5 || len(j.retired) != 1 {
		t.Fatalf("from the header alone: %d records, at %d, %d segments kept; want at 5, the segment kept", len(recs), j.last, len(j.retired))
	}
	l = openLogIn(t, dir)
	if got := l.journal.position(); got != 6 {
		t.Fatalf("opened, the journal holds up to %d, want 6, where the stream ends", got)
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

// A segment's records read back as written, headers and all; a record cut
// short or with a wrong checksum ends the segment there, and what follows
// it is not read. A segment written before records carried headers reads
// back with none.
func TestReadSegment(t *testing.T) {
	hdr := func(i int) []byte {
		return appendHeader(nil, nats.Header{"Nats-Msg-Id": {fmt.Sprintf("op-%d", i)}})
	}
	seg := binary.BigEndian.AppendUint64([]byte(journalMagic), 7)
	v1 := binary.BigEndian.AppendUint64([]byte(journalMagicV1), 7)
	var ends []int
	for i := range 3 {
		seg = appendRecord(seg, journalRecord{pos: uint64(8 + i), hdr: hdr(i), data: fmt.Appendf(nil, "data %d", i)})
		v1 = appendRecordV1(v1, journalRecord{pos: uint64(8 + i), data: fmt.Appendf(nil, "data %d", i)})
		ends = append(ends, len(seg))
	}
	flipped := bytes.Clone(seg)
	flipped[ends[0]+recordHead+12+len(hdr(1))] ^= 1 // the second record's data
	for _, tc := range []struct {
		name    string
		b       []byte
		want    int // records read
		version int
	}{
		{"whole", seg, 3, 2},
		{"last cut short", seg[:len(seg)-1], 2, 2},
		{"only a length left", seg[:ends[1]+3], 2, 2},
		{"second corrupt", flipped, 1, 2},
		{"header only", seg[:segmentHead], 0, 2},
		{"header cut short", seg[:5], 0, 2},
		{"empty", nil, 0, 2},
		{"without headers", v1, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version, base, recs, err := readSegment(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tc.want || version != tc.version {
				t.Fatalf("%d records of version %d, want %d of version %d", len(recs), version, tc.want, tc.version)
			}
			if len(tc.b) >= segmentHead && base != 7 {
				t.Fatalf("base %d, want 7", base)
			}
			for i, r := range recs {
				if r.pos != uint64(8+i) || string(r.data) != fmt.Sprintf("data %d", i) {
					t.Fatalf("record %d: %d %q", i, r.pos, r.data)
				}
				h, err := parseHeader(r.hdr)
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("op-%d", i)
				if version == 1 {
					want = ""
				}
				if got := h.Get("Nats-Msg-Id"); got != want {
					t.Fatalf("record %d: id %q, want %q", i, got, want)
				}
			}
		})
	}
	if _, _, _, err := readSegment([]byte("something else entirely, not a journal")); err == nil {
		t.Fatal("a file that is not a segment was read as one")
	}
}

// openLogWith opens the log in dir with its files synced by sync.
func openLogWith(t *testing.T, dir string, sync func(string) error) (*JetStreamLog, error) {
	t.Helper()
	c := singleNode(dir)
	c.syncFiles = sync
	l, err := openJetStream(context.Background(), c)
	if err == nil {
		t.Cleanup(func() { _ = l.Close() })
	}
	return l, err
}

// A segment is deleted only once the stream's files are known, by the
// order of operations, to hold every position it holds on disk: never
// while the log runs, never when the sync of the stream's files fails,
// only after that sync returns, and never a segment holding an entry the
// server has not written to its files yet (one stored again from the
// journal). Here the stream's store goes back to a copy that ends at 5,
// as a crash would leave it, while the journal holds 1 to 7, a segment
// each.
func TestJournalSegmentKeptUntilItsPositionIsSynced(t *testing.T) {
	msgs := messages(7, "op")
	// The copy: the same five messages, stored by a log of its own.
	other := t.TempDir()
	l := openLogIn(t, other)
	appendN(t, l, msgs[:5])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l = openLogIn(t, dir)
	l.journal.segmentAge, l.journal.segmentMin = 0, 0
	appendN(t, l, msgs)
	if segs := segments(t, dir); len(segs) != 7 {
		t.Fatalf("%d segments while the log runs, want all 7 kept: %v", len(segs), segs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, filepath.Join(other, "jetstream"), filepath.Join(dir, "jetstream"))
	all := segments(t, dir)

	// The stream's files could not be synced: nothing is deleted, and the
	// log does not open on a stream it cannot make durable.
	broken := errors.New("the disk refused the sync")
	if _, err := openLogWith(t, dir, func(string) error { return broken }); !errors.Is(err, broken) {
		t.Fatalf("opening with a failing sync: %v, want its error", err)
	}
	if segs := segments(t, dir); len(segs) != len(all) {
		t.Fatalf("%d segments after a failed sync, want all %d", len(segs), len(all))
	}

	// The sync runs before any segment goes; after it, the segments of 1
	// to 5 go and those of 6 and 7, stored again, stay.
	var synced []string
	l, err := openLogWith(t, dir, func(d string) error {
		if segs := segments(t, dir); len(segs) != len(all) {
			t.Errorf("a segment was deleted before the stream's files were synced: %d of %d left", len(segs), len(all))
		}
		synced = append(synced, d)
		return syncTree(d)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || !strings.HasSuffix(synced[0], filepath.Join("streams", streamName)) {
		t.Fatalf("synced %v, want the operation stream's directory once", synced)
	}
	if segs := segments(t, dir); !slices.Equal(segs, all[5:]) {
		t.Fatalf("segments after opening: %v, want those of positions 6 and 7: %v", segs, all[5:])
	}
	got := entries(t, l, 7)
	for i, m := range msgs {
		if got[uint64(i+1)] != string(m.Data) {
			t.Fatalf("position %d holds %q, want %q", i+1, got[uint64(i+1)], m.Data)
		}
	}
	for _, pos := range []uint64{6, 7} {
		// Stored again with the op_id the append gave it.
		m, err := l.stream.GetMsg(context.Background(), pos)
		if err != nil || m.Header.Get(jetstream.MsgIDHeader) != msgs[pos-1].ID {
			t.Fatalf("position %d stored again with headers %v (%v), want its op_id %s", pos, m.Header, err, msgs[pos-1].ID)
		}
	}

	// Opened again, the server has written 6 and 7 to its files and
	// recovered them from there: the last segments go too.
	l = reopen(t, l, dir)
	if segs := segments(t, dir); len(segs) != 0 {
		t.Fatalf("segments the stream's synced files cover were kept: %v", segs)
	}
	if got := l.journal.position(); got != 7 {
		t.Fatalf("the journal holds up to %d, want 7", got)
	}
}

// Entries stored again from the journal keep every header they were
// stored with, not only their data: their op_id is back in the duplicate
// window, so an append of it is answered with the position it had, and a
// header of any other name comes back as it was. A segment written before
// records carried headers is still read and its entries stored again.
func TestReplayKeepsEveryHeader(t *testing.T) {
	dir := t.TempDir()
	l := openLogIn(t, dir)
	appendN(t, l, messages(2, "op"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	three := nats.Header{"Nats-Msg-Id": {"op-three"}, "Crewlet-Note": {"kept", "both values"}, "lower-case": {"as it was"}}
	seg := binary.BigEndian.AppendUint64([]byte(journalMagic), 2)
	seg = appendRecord(seg, journalRecord{pos: 3, hdr: appendHeader(nil, three), data: []byte("three")})
	old := binary.BigEndian.AppendUint64([]byte(journalMagicV1), 3)
	old = appendRecordV1(old, journalRecord{pos: 4, data: []byte("four")})
	for n, b := range map[int][]byte{998: seg, 999: old} {
		if err := os.WriteFile(filepath.Join(dir, "journal", fmt.Sprintf("%020d%s", n, journalExt)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	l = openLogIn(t, dir)
	m, err := l.stream.GetMsg(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "three" || len(m.Header) != len(three) {
		t.Fatalf("position 3 holds %q with headers %v, want %q with %v", m.Data, m.Header, "three", three)
	}
	for k, v := range three {
		if !slices.Equal(m.Header[k], v) {
			t.Fatalf("header %s is %q after the entry was stored again, want %q", k, m.Header[k], v)
		}
	}
	if m, err := l.stream.GetMsg(context.Background(), 4); err != nil || string(m.Data) != "four" {
		t.Fatalf("position 4 from a segment without headers: %v %v", m, err)
	}
	again, err := l.Append(context.Background(), []Message{{ID: "op-three", Data: []byte("three again")}})
	if err != nil || again[0] != 3 {
		t.Fatalf("its op_id appended again: %v %v, want position 3", again, err)
	}
	if last, err := l.Last(context.Background()); err != nil || last != 4 {
		t.Fatalf("the stream ends at %d (%v), want 4", last, err)
	}
}
