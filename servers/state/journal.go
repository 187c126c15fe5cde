package state

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlet/hub/servers/atomicfile"
)

// The journal is how a single node's log makes its appends durable.
//
// nats-server's file store, asked to fsync every message (SyncAlways),
// syncs each message on its own; its one way to share a sync, an atomic
// batch, stages every batch in a store of its own first, which costs more
// than the shared sync saves. So a single node's operation stream persists
// asynchronously (the server syncs it every streamSyncInterval), and the
// log keeps this journal beside it: the appends that go together are
// written to the journal in one write and one fsync before any of their
// callers is answered and before any follower reads them. After a crash the
// stream may lack what it had not synced; opening the log stores again, at
// the same positions, whatever the journal holds past the stream's end.
//
// The journal only has to outlive the server's own sync of the same
// entries, so a segment is deleted journalKeep after it stops growing: many
// times the sync interval.
//
// A segment is a header (journalMagic, then the position the journal
// covered when the segment began) and records, each
//
//	u32 length of the body | u32 CRC-32C of the body | body: u64 position, data
//
// in position order. A record cut short or failing its checksum ends the
// segment: it is a write the crash interrupted, never answered.
type journal struct {
	dir string
	// wmu is held by a write from its first byte to its fsync, and by
	// close, which so waits for the write in progress.
	wmu     sync.Mutex
	closed  bool
	f       *os.File // the segment being written; nil after a failed write
	seg     uint64   // its number (segments are named by number)
	size    int64
	started time.Time
	retired []retiredSegment
	// last is the newest position the journal holds: every position up to
	// it is in the journal or was synced by the server before the journal
	// began.
	last uint64
	buf  []byte
	// keep, segmentAge and segmentMin are journalKeep, journalSegmentAge
	// and journalSegmentMin, smaller in tests.
	keep, segmentAge time.Duration
	segmentMin       int64
	// writes counts the writes made durable.
	writes atomic.Uint64

	// durable is last as followers see it; wake is closed and replaced
	// whenever it moves.
	durable atomic.Uint64
	mu      sync.Mutex
	wake    chan struct{}
}

type retiredSegment struct {
	path string
	at   time.Time
}

// journalRecord is one entry: the stream's position and the message's bytes.
type journalRecord struct {
	pos  uint64
	data []byte
}

const (
	journalMagic = "crewlet-journal\x01"
	journalExt   = ".wal"
	// streamSyncInterval is how often the server syncs the stream it
	// persists asynchronously; journalKeep is how long a segment is kept
	// after it stops growing, well past that.
	streamSyncInterval = time.Second
	journalKeep        = 30 * time.Second
	// A segment stops growing at journalSegmentSize, or at
	// journalSegmentAge once it holds journalSegmentMin: a busy journal
	// stays a few segments long, and a quiet one does not pay for a new
	// file (and its two fsyncs) with every write.
	journalSegmentAge  = 10 * time.Second
	journalSegmentSize = 32 << 20
	journalSegmentMin  = 1 << 20
	recordHead         = 8 // length and checksum
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openJournal reads the segments under dir and keeps them for journalKeep
// as retired; the first write starts a new one. It answers every record
// they hold, in position order, for the log to compare with its stream,
// and whether there was no segment at all.
func openJournal(dir string) (j *journal, recs []journalRecord, fresh bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, false, fmt.Errorf("state: journal directory: %w", err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"+journalExt))
	if err != nil {
		return nil, nil, false, err
	}
	j = &journal{dir: dir, wake: make(chan struct{}), keep: journalKeep, segmentAge: journalSegmentAge, segmentMin: journalSegmentMin}
	type seg struct {
		n    uint64
		path string
	}
	var segs []seg
	for _, path := range names {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), journalExt), 10, 64)
		if err != nil {
			continue // not a segment this journal wrote
		}
		segs = append(segs, seg{n, path})
	}
	slices.SortFunc(segs, func(a, b seg) int { return cmp.Compare(a.n, b.n) })
	now := time.Now()
	for _, s := range segs {
		b, err := os.ReadFile(s.path)
		if err != nil {
			return nil, nil, false, fmt.Errorf("state: read journal segment: %w", err)
		}
		base, got, err := readSegment(b)
		if err != nil {
			return nil, nil, false, fmt.Errorf("state: journal segment %s: %w", s.path, err)
		}
		j.last = max(j.last, base)
		for _, r := range got {
			if r.pos > j.last {
				recs = append(recs, r)
				j.last = r.pos
			}
		}
		j.retired = append(j.retired, retiredSegment{s.path, now})
		j.seg = s.n
	}
	return j, recs, len(segs) == 0, nil
}

// readSegment parses one segment: its base and its records up to the first
// one that is cut short or corrupt.
func readSegment(b []byte) (base uint64, recs []journalRecord, err error) {
	if len(b) < len(journalMagic)+8 || string(b[:len(journalMagic)]) != journalMagic {
		if len(b) < len(journalMagic)+8 && strings.HasPrefix(journalMagic, string(b)) {
			return 0, nil, nil // created, its header never completed
		}
		return 0, nil, errors.New("not a journal segment")
	}
	base = binary.BigEndian.Uint64(b[len(journalMagic):])
	b = b[len(journalMagic)+8:]
	last := base
	for len(b) >= recordHead {
		n := int(binary.BigEndian.Uint32(b))
		if n < 8 || n > len(b)-recordHead {
			break
		}
		body := b[recordHead : recordHead+n]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
			break
		}
		pos := binary.BigEndian.Uint64(body)
		if pos <= last {
			break // positions only grow: this is not a record this journal wrote
		}
		recs = append(recs, journalRecord{pos: pos, data: body[8:]})
		last = pos
		b = b[recordHead+n:]
	}
	return base, recs, nil
}

// appendRecord encodes r onto b.
func appendRecord(b []byte, r journalRecord) []byte {
	n := 8 + len(r.data)
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, r.pos)
	b = append(b, r.data...)
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+recordHead:], castagnoli))
	return b
}

// startSegment begins the next segment, its header naming the position
// the journal holds so far, and makes it and its name durable.
func (j *journal) startSegment() error {
	j.seg++
	path := filepath.Join(j.dir, fmt.Sprintf("%020d%s", j.seg, journalExt))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("state: journal segment: %w", err)
	}
	head := binary.BigEndian.AppendUint64([]byte(journalMagic), j.last)
	if _, err = f.Write(head); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = atomicfile.SyncDir(j.dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("state: journal segment: %w", err)
	}
	j.f, j.size, j.started = f, int64(len(head)), time.Now()
	return nil
}

// write makes recs durable: one write, one fsync. Records must follow the
// journal's last position without a gap (see JetStreamLog.journalThrough);
// those at or before it are already held and are left out. After a failed
// write or sync the segment is given up (a failed fsync may have dropped
// its pages) and the next write starts a new one; the records of the
// failed write are not held, and whoever writes next must bring them again.
func (j *journal) write(recs []journalRecord) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if j.closed {
		return ErrLogClosed
	}
	b := j.buf[:0]
	last := j.last
	for _, r := range recs {
		if r.pos <= last {
			continue
		}
		if r.pos != last+1 {
			return fmt.Errorf("state: journal write of position %d after %d", r.pos, last)
		}
		b = appendRecord(b, r)
		last = r.pos
	}
	j.buf = b
	if last == j.last {
		return nil
	}
	if j.f == nil {
		if err := j.startSegment(); err != nil {
			return err
		}
	}
	_, err := j.f.Write(b)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.retire()
		return fmt.Errorf("state: journal write: %w", err)
	}
	j.size += int64(len(b))
	j.last = last
	j.writes.Add(1)
	if cap(j.buf) > 1<<20 {
		j.buf = nil // one large group need not pin its buffer
	}
	j.advance(last)
	if j.size >= journalSegmentSize || (j.size >= j.segmentMin && time.Since(j.started) >= j.segmentAge) {
		j.retire()
	}
	j.dropRetired()
	return nil
}

// retire stops writing the current segment; the next write starts another.
func (j *journal) retire() {
	if j.f == nil {
		return
	}
	_ = j.f.Close()
	j.retired = append(j.retired, retiredSegment{j.f.Name(), time.Now()})
	j.f = nil
}

// dropRetired deletes the segments retired more than journalKeep ago.
func (j *journal) dropRetired() {
	keep := j.retired[:0]
	for _, s := range j.retired {
		if time.Since(s.at) < j.keep {
			keep = append(keep, s)
			continue
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			keep = append(keep, s) // tried again next time
		}
	}
	j.retired = keep
}

// advance lets followers read up to pos.
func (j *journal) advance(pos uint64) {
	j.durable.Store(pos)
	j.mu.Lock()
	close(j.wake)
	j.wake = make(chan struct{})
	j.mu.Unlock()
}

// waitDurable returns once pos is durable, or when ctx or the log ends.
func (j *journal) waitDurable(ctx context.Context, pos uint64, done <-chan struct{}) error {
	for {
		j.mu.Lock()
		wake := j.wake
		j.mu.Unlock()
		if j.durable.Load() >= pos {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return ErrLogClosed
		}
	}
}

// close closes the segment being written; it is safe twice.
func (j *journal) close() {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if j.closed {
		return
	}
	j.closed = true
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
}

// position is the newest position the journal holds.
func (j *journal) position() uint64 {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	return j.last
}
