package state

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/crewlet/hub/servers/atomicfile"
)

// The journal is how a single node's log makes its appends durable.
//
// nats-server's file store, asked to fsync every message (SyncAlways),
// syncs each message on its own; its one way to share a sync, an atomic
// batch, stages every batch in a store of its own first, which costs more
// than the shared sync saves. So a single node's operation stream persists
// asynchronously, and the log keeps this journal beside it: the appends
// that go together are written to the journal in one write and one fsync
// before any of their callers is answered and before any follower reads
// them. After a crash the stream may lack what it had not synced; opening
// the log stores again, at the same positions and with the same headers,
// whatever the journal holds past the stream's end.
//
// A segment is deleted only once every position it holds is known to be in
// the stream's files on disk, and that is known by the order of operations,
// never by a clock. nats-server syncs an asynchronous stream on a timer of
// its own and offers no call that syncs it on demand (its flush-and-sync is
// reached only by replicated streams and atomic batches, which an
// asynchronous stream refuses; stopping a store writes its files without
// syncing them). So the log makes the stream durable itself, at the one
// moment it knows what the stream's files hold: when the log opens, the
// server has just recovered the stream from its files, so every position
// up to the stream's end is in them. The log fsyncs every file and
// directory of the stream (syncStreamFiles), and only after that succeeds
// are the segments whose every position is at or before that end deleted;
// a segment holding anything past it (entries stored again from the
// journal, which the server has not written yet) is kept until a later
// open finds it covered. While the log runs no segment is deleted: the
// journal holds the run's appends until the next open.
//
// A segment is a header (journalMagic, then the position the journal
// covered when the segment began) and records, each
//
//	u32 length of the body | u32 CRC-32C of the body |
//	body: u64 position, u32 length of the headers, headers, data
//
// in position order, the headers being the message's NATS headers as the
// stream stored them (its Nats-Msg-Id among them), encoded by
// appendHeader. A record cut short or failing its checksum ends the
// segment: it is a write the crash interrupted, never answered. Segments
// written before records carried headers (journalMagicV1: the body is the
// position and the data) are still read; their records are stored again
// without headers, which is all they had.
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
	// retired are the segments no longer written, kept until synced
	// covers them.
	retired []retiredSegment
	// last is the newest position the journal holds: every position up to
	// it is in the journal or known to be in the stream's files on disk.
	last uint64
	// synced is the newest position known to be in the stream's files on
	// disk: a segment whose positions are all at or before it may go.
	synced uint64
	buf    []byte
	// segmentAge and segmentMin are journalSegmentAge and
	// journalSegmentMin, smaller in tests.
	segmentAge time.Duration
	segmentMin int64
	// writes counts the writes made durable.
	writes atomic.Uint64

	// durable is last as followers see it; wake is closed and replaced
	// whenever it moves.
	durable atomic.Uint64
	mu      sync.Mutex
	wake    chan struct{}
}

// retiredSegment is a segment no longer written and the newest position
// it holds.
type retiredSegment struct {
	path string
	last uint64
}

// journalRecord is one entry: the stream's position, the message's NATS
// headers as encoded by appendHeader, and its data.
type journalRecord struct {
	pos  uint64
	hdr  []byte
	data []byte
}

const (
	journalMagic   = "crewlet-journal\x02"
	journalMagicV1 = "crewlet-journal\x01"
	journalExt     = ".wal"
	// A segment stops growing at journalSegmentSize, or at
	// journalSegmentAge once it holds journalSegmentMin: a busy journal
	// does not keep one huge file open, and a quiet one does not pay for
	// a new file (and its two fsyncs) with every write. (The age only
	// rotates files; what may be deleted is decided by synced alone.)
	journalSegmentAge  = 10 * time.Second
	journalSegmentSize = 32 << 20
	journalSegmentMin  = 1 << 20
	recordHead         = 8 // length and checksum
	segmentHead        = len(journalMagic) + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openJournal opens the journal under dir, given synced, a position up to
// which the stream's files are known to be on disk: it hands past, in
// position order, each record past synced (for the log to compare with its
// stream's end; its bytes are valid only during the call), deletes the
// segments that hold nothing past synced and keeps the others as retired
// (the first write starts a new one). past may be nil.
//
// A segment other than the newest holds nothing past the header of the
// next one, so such a segment is deleted, when that header is at or
// before synced, without being read: opening reads what a crash may have
// left the stream without, not the whole run before it, and holds one
// segment in memory at a time.
func openJournal(dir string, synced uint64, past func(journalRecord) error) (j *journal, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: journal directory: %w", err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"+journalExt))
	if err != nil {
		return nil, err
	}
	j = &journal{dir: dir, wake: make(chan struct{}), synced: synced, segmentAge: journalSegmentAge, segmentMin: journalSegmentMin}
	type seg struct {
		n    uint64
		path string
		base uint64
		// whole says the header was read whole: one a crash cut short
		// names no position.
		whole bool
	}
	var segs []seg
	for _, path := range names {
		n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), journalExt), 10, 64)
		if err != nil {
			continue // not a segment this journal wrote
		}
		segs = append(segs, seg{n: n, path: path})
	}
	slices.SortFunc(segs, func(a, b seg) int { return cmp.Compare(a.n, b.n) })
	for i := range segs {
		if segs[i].base, segs[i].whole, err = segmentBase(segs[i].path); err != nil {
			return nil, err
		}
	}
	for i, s := range segs {
		j.seg = s.n
		j.last = max(j.last, s.base)
		if i+1 < len(segs) && segs[i+1].whole && segs[i+1].base <= synced {
			if err := removeSegment(s.path); err != nil {
				return nil, err
			}
			continue
		}
		b, err := os.ReadFile(s.path)
		if err != nil {
			return nil, fmt.Errorf("state: read journal segment: %w", err)
		}
		_, _, got, err := readSegment(b)
		if err != nil {
			return nil, fmt.Errorf("state: journal segment %s: %w", s.path, err)
		}
		for _, r := range got {
			if r.pos <= j.last {
				continue
			}
			if r.pos > synced && past != nil {
				if err := past(r); err != nil {
					return nil, err
				}
			}
			j.last = r.pos
		}
		j.retired = append(j.retired, retiredSegment{s.path, j.last})
	}
	// What the stream holds on disk the journal need not: it begins
	// there if it held less (no segment at all, or one moved aside).
	j.last = max(j.last, synced)
	if err := j.dropRetired(); err != nil {
		return nil, err
	}
	return j, nil
}

// segmentBase reads the position a segment's header names, and whether
// the header is whole: one a crash left incomplete names none.
func segmentBase(path string) (base uint64, whole bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, fmt.Errorf("state: read journal segment: %w", err)
	}
	defer f.Close()
	head := make([]byte, segmentHead)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("state: read journal segment: %w", err)
	}
	if _, base, _, err = readSegment(head[:n]); err != nil {
		return 0, false, fmt.Errorf("state: journal segment %s: %w", path, err)
	}
	return base, n == segmentHead, nil
}

// readSegment parses one segment: its format version (1 or 2), its base
// and its records up to the first one that is cut short or corrupt.
func readSegment(b []byte) (version int, base uint64, recs []journalRecord, err error) {
	switch {
	case len(b) >= segmentHead && string(b[:len(journalMagic)]) == journalMagic:
		version = 2
	case len(b) >= segmentHead && string(b[:len(journalMagicV1)]) == journalMagicV1:
		version = 1
	case len(b) < segmentHead && (strings.HasPrefix(journalMagic, string(b)) || strings.HasPrefix(string(b), journalMagic)):
		return 2, 0, nil, nil // created, its header never completed
	default:
		return 0, 0, nil, errors.New("not a journal segment")
	}
	base = binary.BigEndian.Uint64(b[len(journalMagic):])
	b = b[segmentHead:]
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
		r := journalRecord{pos: binary.BigEndian.Uint64(body), data: body[8:]}
		if version == 2 {
			if len(r.data) < 4 || int(binary.BigEndian.Uint32(r.data)) > len(r.data)-4 {
				break // not a record this journal wrote
			}
			h := int(binary.BigEndian.Uint32(r.data))
			r.hdr, r.data = r.data[4:4+h], r.data[4+h:]
		}
		if r.pos <= last {
			break // positions only grow: this is not a record this journal wrote
		}
		recs = append(recs, r)
		last = r.pos
		b = b[recordHead+n:]
	}
	return version, base, recs, nil
}

// appendRecord encodes r onto b.
func appendRecord(b []byte, r journalRecord) []byte {
	n := 8 + 4 + len(r.hdr) + len(r.data)
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, r.pos)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.hdr)))
	b = append(b, r.hdr...)
	b = append(b, r.data...)
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+recordHead:], castagnoli))
	return b
}

// appendHeader encodes h onto b: for each key in order, each of its
// values as u16 length of the key, key, u32 length of the value, value.
// Nothing for no header.
func appendHeader(b []byte, h nats.Header) []byte {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
			b = append(b, k...)
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// parseHeader decodes what appendHeader encoded; nil for nothing.
func parseHeader(b []byte) (nats.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	h := nats.Header{}
	for len(b) > 0 {
		if len(b) < 2 || int(binary.BigEndian.Uint16(b)) > len(b)-2-4 {
			return nil, errors.New("state: a journal record's headers are cut short")
		}
		k := string(b[2 : 2+binary.BigEndian.Uint16(b)])
		b = b[2+len(k):]
		n := int(binary.BigEndian.Uint32(b))
		if n > len(b)-4 {
			return nil, errors.New("state: a journal record's headers are cut short")
		}
		// Keys are kept as the stream stored them: not canonicalised.
		h[k] = append(h[k], string(b[4:4+n]))
		b = b[4+n:]
	}
	return h, nil
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
		// What the failed write may have left in the file is past last:
		// the segment is kept for what it held before.
		j.retire(j.last)
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
		j.retire(last)
	}
	return nil
}

// retire stops writing the current segment, whose newest position is
// last; the next write starts another.
func (j *journal) retire(last uint64) {
	if j.f == nil {
		return
	}
	_ = j.f.Close()
	j.retired = append(j.retired, retiredSegment{j.f.Name(), last})
	j.f = nil
}

// dropRetired deletes the retired segments synced covers.
func (j *journal) dropRetired() error {
	keep := j.retired[:0]
	for _, s := range j.retired {
		if s.last > j.synced {
			keep = append(keep, s)
			continue
		}
		if err := removeSegment(s.path); err != nil {
			return err
		}
	}
	j.retired = keep
	return nil
}

// removeSegment deletes a segment the stream's files are known to cover.
// Whether the deletion itself survives a crash does not matter: a segment
// that comes back holds only what the stream holds on disk.
func removeSegment(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: delete a journal segment the stream covers: %w", err)
	}
	return nil
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
