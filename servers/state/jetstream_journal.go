package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crewlet/hub/servers/atomicfile"
)

// Opening a single node's journaled log: making the stream's files durable,
// bringing the stream and the journal level, and moving a stream made
// before the journal onto it. The journal itself is journal.go.

// openJournal opens the journal and brings the stream and the journal level.
// First the stream's files are made durable: the server has just recovered
// the stream from them, so every position up to its end is in them, and
// once they are synced the journal's segments that hold nothing past that
// end are deleted (see journal.go). What the journal holds past the
// stream's end (lost with a crash before the server synced it) is stored
// again at the same positions with the same headers. What the stream holds
// past the journal's end (stored, never answered) needs no journaling: the
// sync covered it. Then followers may read the whole stream.
func (l *JetStreamLog) openJournal(ctx context.Context, c logConfig) error {
	last, err := l.Last(ctx)
	if err != nil {
		return fmt.Errorf("state: the operation stream's end: %w", err)
	}
	syncFiles := c.syncFiles
	if syncFiles == nil {
		syncFiles = syncTree
	}
	if err := l.syncStreamFiles(syncFiles); err != nil {
		return err
	}
	j, err := openJournal(c.journal, last, func(r journalRecord) error {
		if r.pos != last+1 {
			return fmt.Errorf("state: the journal in %s holds position %d but the operation stream ends at %d: what is between is in neither, so the node does not start; move the journal aside to start with what the stream holds", c.journal, r.pos, last)
		}
		// With every header it was stored with, its op_id among them: the
		// duplicate window answers a retry of it with this position, as
		// it would have before the crash. The stream up to here is what it
		// was when the message was first stored, so a condition it carries
		// holds again.
		h, err := parseHeader(r.hdr)
		if err != nil {
			return fmt.Errorf("state: position %d in the journal: %w", r.pos, err)
		}
		ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: streamSubject, Header: h, Data: r.data})
		if err != nil {
			return fmt.Errorf("state: store again position %d from the journal: %w", r.pos, err)
		}
		if ack.Sequence != r.pos {
			return fmt.Errorf("state: position %d from the journal was stored again at %d", r.pos, ack.Sequence)
		}
		last = r.pos
		return nil
	})
	if err != nil {
		return err
	}
	l.journal = j
	j.advance(j.position())
	l.group = &appendGroup{}
	return nil
}

// syncStreamFiles makes the operation stream's files and directories
// durable with sync, and the directories that lead to them. The stream's
// directory is where nats-server's file store keeps a stream: under its
// store directory, the account's, then streams/<name>.
func (l *JetStreamLog) syncStreamFiles(sync func(dir string) error) error {
	store := l.ns.StoreDir()
	dir := filepath.Join(store, l.ns.GlobalAccount().GetName(), "streams", streamName)
	if err := sync(dir); err != nil {
		return fmt.Errorf("state: sync the operation stream's files: %w", err)
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if err := atomicfile.SyncDir(d); err != nil {
			return fmt.Errorf("state: sync the operation stream's files: %w", err)
		}
		if d == filepath.Dir(store) || d == filepath.Dir(d) {
			return nil
		}
	}
}

// syncTree fsyncs every file and directory under root, root included. A
// file that goes while it walks (the server replacing one of its own) is
// passed over: its replacement is walked or was written synced.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != root {
				return nil
			}
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != root {
				return nil
			}
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// moveToJournal moves a single node's operation stream made before the
// journal (whose persist mode, the server's fsync of each message, cannot
// change) onto the journal, so that every data directory's appends are
// made durable the same way: the stream is copied into the journal, each
// entry with its headers, and once every position is in the journal and
// synced the stream is deleted; opening the log then makes it again,
// persisting asynchronously, and stores every entry again from the
// journal at its own position. A crash at any step leaves either the old
// stream (the copy goes on where the journal ends) or the journal holding
// every entry (opening stores again what the new stream lacks).
//
// A stream that cannot be stored again position for position stays as it
// is and keeps the server's fsync of each message, equally durable: one
// with a gap (an entry deleted) or not starting at 1, or one where an
// op_id appears twice (storing it again inside the duplicate window would
// be answered with the first one's position).
func (l *JetStreamLog) moveToJournal(ctx context.Context, dir string) error {
	s, err := l.js.Stream(ctx, streamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: the operation stream: %w", err)
	}
	info := s.CachedInfo()
	if info.Config.PersistMode == jetstream.AsyncPersistMode {
		return nil
	}
	st := info.State
	if st.Msgs != st.LastSeq || (st.Msgs > 0 && st.FirstSeq != 1) {
		return nil
	}
	j, err := openJournal(dir, 0, nil)
	if err != nil {
		return err
	}
	defer j.close()
	if j.last > st.LastSeq {
		return fmt.Errorf("state: the journal in %s holds position %d but the operation stream, made before the journal, ends at %d; move the journal aside to start with what the stream holds", dir, j.last, st.LastSeq)
	}
	ids := map[string]struct{}{}
	var batch []journalRecord
	size := 0
	for pos := uint64(1); pos <= st.LastSeq; pos++ {
		m, err := s.GetMsg(ctx, pos)
		if err != nil {
			return fmt.Errorf("state: read position %d to move it onto the journal: %w", pos, err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
			if _, twice := ids[id]; twice {
				// The stream stays; what was copied of it goes, the
				// stream holding all of it fsynced.
				j.close()
				return removeSegments(dir)
			}
			ids[id] = struct{}{}
		}
		if pos <= j.last {
			continue // copied before a crash
		}
		batch = append(batch, journalRecord{pos: pos, hdr: appendHeader(nil, m.Header), data: m.Data})
		if size += len(m.Data); size >= maxGroupBytes {
			if err := j.write(batch); err != nil {
				return err
			}
			batch, size = batch[:0], 0
		}
	}
	if err := j.write(batch); err != nil {
		return err
	}
	if got := j.position(); got != st.LastSeq {
		return fmt.Errorf("state: moving the operation stream onto the journal: the journal holds up to %d, not the stream's %d", got, st.LastSeq)
	}
	if err := l.js.DeleteStream(ctx, streamName); err != nil {
		return fmt.Errorf("state: moving the operation stream onto the journal: %w", err)
	}
	return nil
}

// removeSegments deletes every segment under dir.
func removeSegments(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*"+journalExt))
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := removeSegment(name); err != nil {
			return err
		}
	}
	return nil
}
