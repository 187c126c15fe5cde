// Package statetest is the test kit of the state layer: a log that breaks on
// request, and a node opened over it. It is for tests only; nothing in the
// product imports it.
package statetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewlet/hub/servers/state"
)

// Faults are the ways a FaultLog breaks. Counters count down as appends use
// them.
type Faults struct {
	// DropAcks: the next n appends land, but the caller hears an error, as
	// when a connection dies after the server stored the entry.
	DropAcks int
	// Skip lets this many appends through before DropAfterSkip more lose
	// their acknowledgement.
	Skip, DropAfterSkip int
	// Hide: the next n appends land, their acknowledgement is lost, and
	// this node's follower never sees them — as a node that adopted a
	// snapshot past them would not — so its ledger cannot vouch for what
	// came before.
	Hide int
	// Refuse: appends fail before reaching the log, said as not appended.
	Refuse bool
	// StripIDs: appends carry no dedupe id, as if past the log's duplicate
	// window.
	StripIDs bool
	// BreakFollow: the follower's reading of the log fails at the next n
	// entries, before it delivers them, as when a delivery is lost on
	// the way.
	BreakFollow int
}

// FaultLog wraps a real log and breaks it in the ways Set asks for.
type FaultLog struct {
	state.Log

	mu      sync.Mutex
	f       Faults
	hidden  map[uint64]bool
	appends atomic.Int64
	// held, while not nil, keeps the follower from receiving anything
	// until it is closed: a node whose projection lags its log.
	held  chan struct{}
	blobs *FaultBlobs
}

// Blobs is the node's blob store as OpenFaulty wrapped it.
func (l *FaultLog) Blobs() *FaultBlobs { return l.blobs }

// FaultBlobs wraps a blob store and corrupts what it reads on request: a
// chunk that went bad on disk, as a reader that checks digests must catch.
type FaultBlobs struct {
	state.Blobs
	mu      sync.Mutex
	corrupt func(name string) bool
}

// Corrupt flips a byte of every blob read whose name fn picks; nil stops.
func (b *FaultBlobs) Corrupt(fn func(name string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.corrupt = fn
}

// Get reads through the wrapped store, corrupted as asked.
func (b *FaultBlobs) Get(ctx context.Context, name string) ([]byte, error) {
	data, err := b.Blobs.Get(ctx, name)
	b.mu.Lock()
	fn := b.corrupt
	b.mu.Unlock()
	if err == nil && fn != nil && fn(name) && len(data) > 0 {
		data = append([]byte(nil), data...)
		data[len(data)/2] ^= 0xff
	}
	return data, err
}

// Hold keeps every entry from reaching the node's follower until Release,
// so writes land in the log but not on this node's projection.
func (l *FaultLog) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(chan struct{})
	}
}

// Release lets the follower go on after Hold.
func (l *FaultLog) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		close(l.held)
		l.held = nil
	}
}

// Set changes the faults under the log's lock.
func (l *FaultLog) Set(fn func(*Faults)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(&l.f)
}

// Appends counts the appends that reached the wrapped log.
func (l *FaultLog) Appends() int64 { return l.appends.Load() }

// Follow delivers what the wrapped log holds, minus hidden entries, and
// waits while the log is held.
func (l *FaultLog) Follow(ctx context.Context, from uint64, deliver func(state.Entry) error) error {
	return l.Log.Follow(ctx, from, func(e state.Entry) error {
		l.mu.Lock()
		skip, held := l.hidden[e.Position], l.held
		broken := l.f.BreakFollow > 0
		if broken {
			l.f.BreakFollow--
		}
		l.mu.Unlock()
		if broken {
			return fmt.Errorf("injected: delivery of position %d lost", e.Position)
		}
		if held != nil {
			select {
			case <-held:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if skip {
			return nil
		}
		return deliver(e)
	})
}

// Append appends through the wrapped log, breaking as asked.
func (l *FaultLog) Append(ctx context.Context, msgs []state.Message) ([]uint64, error) {
	l.mu.Lock()
	if l.f.Refuse {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: injected", state.ErrNotAppended)
	}
	if l.f.StripIDs {
		msgs = append([]state.Message(nil), msgs...)
		for i := range msgs {
			msgs[i].ID = ""
		}
	}
	drop := l.f.DropAcks > 0
	if drop {
		l.f.DropAcks--
	}
	if !drop && l.f.Skip > 0 {
		l.f.Skip--
		if l.f.Skip == 0 {
			l.f.DropAcks, l.f.DropAfterSkip = l.f.DropAfterSkip, 0
		}
	}
	hide := l.f.Hide > 0
	if hide {
		l.f.Hide--
		drop = true
		// Held until the entry is marked hidden, so the follower cannot
		// deliver it first.
		defer l.mu.Unlock()
	} else {
		l.mu.Unlock()
	}
	l.appends.Add(1)
	pos, err := l.Log.Append(ctx, msgs)
	if hide && err == nil {
		if l.hidden == nil {
			l.hidden = map[uint64]bool{}
		}
		for _, p := range pos {
			l.hidden[p] = true
		}
	}
	if drop && err == nil {
		return nil, errors.New("injected: acknowledgement lost")
	}
	return pos, err
}

// OpenFaulty opens a node whose log is a real JetStream log under
// dir/log wrapped in a FaultLog, with that log's blob store unless opts
// names another; opts.Dir and opts.Log are set here. The
// node is closed when the test ends.
func OpenFaulty(t testing.TB, dir string, opts state.Options) (*state.Node, *FaultLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := state.OpenJetStream(ctx, dir+"/log")
	if err != nil {
		t.Fatalf("OpenJetStream: %v", err)
	}
	f := &FaultLog{Log: js}
	opts.Dir, opts.Log = dir, f
	if opts.Blobs == nil {
		if opts.Blobs, err = js.Blobs(ctx); err != nil {
			t.Fatalf("Blobs: %v", err)
		}
	}
	f.blobs = &FaultBlobs{Blobs: opts.Blobs}
	opts.Blobs = f.blobs
	n, err := state.Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n, f
}

// Unwrap is the log the fault log wraps.
func (l *FaultLog) Unwrap() state.Log { return l.Log }

// Grep lists the files under dir that hold marker anywhere, by their path
// inside dir: how a test shows that bytes are really gone from a node's
// data directory, whichever store kept them.
func Grep(t testing.TB, dir, marker string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		// A running node creates and removes files as it goes; one that
		// vanished between the listing and the read holds nothing now.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			hits = append(hits, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
