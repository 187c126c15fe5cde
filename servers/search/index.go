package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// Doc is one searchable document as its server's projection holds it.
type Doc struct {
	ID     string // the document's id in its kind (an item key, a page id)
	Title  string
	Body   string
	Scope  string // a project key, a knowledge container: a query may be narrowed to one
	Hidden bool   // found by no search (a draft page)
}

// Source reads a document's current content from the projection; ok false
// when it no longer exists.
type Source func(r pebble.Reader, id string) (doc Doc, ok bool, err error)

// IDs calls fn with the id of every document of the kind the projection
// holds (hidden ones may be included; Source decides). It is what a
// missing keyword index is rebuilt from, and what the embedder sweeps.
type IDs func(r pebble.Reader, fn func(id string) error) error

// Options configure an Index.
type Options struct {
	Kind     string // e.g. "tracker.items", "knowledge.pages"
	Dir      string // the keyword index's directory (under the node's data directory)
	Node     *state.Node
	Source   Source
	IDs      IDs
	Embedder Embedder // nil: keyword only, and answers say so; SetEmbedder changes it
	Logger   *slog.Logger
	// Noun names one document in answers ("work item", "page");
	// "document" when empty.
	Noun string
	// FreshWait bounds how long a search waits for the keyword index to
	// reach what the projection held when the search began, so a search
	// right after a write finds it; DefaultFreshWait when zero.
	FreshWait time.Duration
	// QueryTimeout bounds the provider's embedding of a query;
	// DefaultQueryTimeout when zero. Past it the answer degrades.
	QueryTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultFreshWait    = 2 * time.Second
	DefaultQueryTimeout = 5 * time.Second
)

// Over is o, one kind's own options (Kind, Source, IDs, Noun and any
// bounds), opened over node with the node's embedder and logger: its
// keyword index in a directory of its own, searchDir/Kind, beside the
// other kinds'. Every server's search is laid out through it, so no two
// kinds share a directory and a kind's directory is found by its name.
func (o Options) Over(node *state.Node, searchDir string, emb Embedder, log *slog.Logger) Options {
	o.Dir = filepath.Join(searchDir, o.Kind)
	o.Node, o.Embedder, o.Logger = node, emb, log
	return o
}

func (o *Options) validate() error {
	var errs []error
	if err := checkKind(o.Kind); err != nil {
		errs = append(errs, err)
	}
	if o.Dir == "" {
		errs = append(errs, errors.New("search: Options.Dir is required"))
	}
	if o.Node == nil {
		errs = append(errs, errors.New("search: Options.Node is required"))
	}
	if o.Source == nil {
		errs = append(errs, errors.New("search: Options.Source is required"))
	}
	if o.IDs == nil {
		errs = append(errs, errors.New("search: Options.IDs is required (a missing index is rebuilt from it)"))
	}
	return errors.Join(errs...)
}

func (o *Options) ensureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Noun == "" {
		o.Noun = "document"
	}
	if o.FreshWait <= 0 {
		o.FreshWait = DefaultFreshWait
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
}

// Index is one kind's search: its keyword index, its vectors, and the two
// goroutines that keep them in step with the projection.
type Index struct {
	opts  Options
	log   *slog.Logger
	bleve bleve.Index
	// meaning is the embedder and its vectors, nil without an embedder;
	// SetEmbedder replaces it, so a search reads it once.
	meaning atomic.Pointer[embedWorker]
	// setMu serialises SetEmbedder.
	setMu sync.Mutex
	// rebuilt says Open built the keyword index from the projection
	// rather than resuming the one on disk.
	rebuilt bool

	mu      sync.Mutex
	through uint64        // the position the keyword index reflects
	moved   chan struct{} // closed and replaced whenever through advances
	closed  bool
	users   sync.WaitGroup // searches in progress, so Close can wait for them
	// waiting counts WaitFor callers, and kick tells the indexer one
	// arrived: nobody waiting, it gathers changes into fewer, larger
	// rounds; somebody waiting, it indexes at once.
	waiting atomic.Int32
	kick    chan struct{}
	// durable is the position the keyword index holds on disk, from the
	// persisted callbacks of its batches; pruned is how far marks were
	// deleted, and pruneMoved is closed and replaced when it advances.
	durable    atomic.Uint64
	pruneMu    sync.Mutex
	pruned     uint64
	pruneMoved chan struct{}

	runCtx    context.Context // what the goroutines run under, ended by Close
	stop      context.CancelFunc
	done      chan struct{} // closed when Close begins
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open opens the kind's index, building its keyword index from the
// projection when there is none, and starts following the projection. The
// node must stay open until Close returns.
func Open(ctx context.Context, opts Options) (*Index, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.ensureDefaults()
	ix := &Index{opts: opts, log: opts.Logger, moved: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	idx, through, err := ix.openKeyword(ctx)
	if err != nil {
		return nil, err
	}
	ix.bleve, ix.through = idx, through
	ix.durable.Store(through)
	ix.pruned, ix.pruneMoved = through, make(chan struct{})
	var w *embedWorker
	if opts.Embedder != nil {
		if w, err = newEmbedWorker(ix, opts.Embedder, true); err != nil {
			_ = idx.Close()
			return nil, err
		}
		ix.meaning.Store(w)
	}
	ix.runCtx, ix.stop = context.WithCancel(context.Background())
	ix.wg.Add(1)
	go ix.follow(ix.runCtx)
	if w != nil {
		ix.start(w)
	}
	return ix, nil
}

// start runs w's goroutine, unless the index is closing.
func (ix *Index) start(w *embedWorker) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ctx, stop := context.WithCancel(ix.runCtx)
	w.stop = stop
	if ix.closed {
		stop()
		close(w.ended)
		return
	}
	ix.wg.Add(1)
	go w.run(ctx)
}

// SetEmbedder makes e the embeddings model meaning is ranked with from now
// on (nil: keyword only, and answers say so), without closing the index.
// An e of the model in force only replaces the client (a new key or
// address). Another model's vectors are not comparable with the ones kept,
// so every document is embedded again in the background; until that is
// done a search is ranked by keyword and says why, and the first search
// after it ranks by meaning again. The embedder replaced is no longer used
// once SetEmbedder returns, so its owner may close it.
func (ix *Index) SetEmbedder(e Embedder) error {
	ix.setMu.Lock()
	defer ix.setMu.Unlock()
	old := ix.meaning.Load()
	var w *embedWorker
	if e != nil {
		var err error
		if w, err = newEmbedWorker(ix, e, old != nil && old.model == e.Model()); err != nil {
			return err
		}
	}
	ix.meaning.Store(w)
	if old != nil {
		old.stop()
		<-old.ended
	}
	from, to := "", ""
	if old != nil {
		from = old.model
	}
	if w != nil {
		to = w.model
		ix.start(w)
	}
	if from != to {
		ix.log.Info("search: the embeddings model changed", "kind", ix.opts.Kind, "from", from, "to", to)
	}
	return nil
}

// Close stops the indexer and the embedder and closes the keyword index.
// It is safe to call twice; the second call returns the first's error.
func (ix *Index) Close() error {
	ix.closeOnce.Do(func() {
		ix.mu.Lock()
		ix.closed = true
		close(ix.done)
		ix.mu.Unlock()
		ix.users.Wait()
		ix.stop()
		ix.wg.Wait()
		ix.closeErr = ix.bleve.Close()
	})
	return ix.closeErr
}

// enter registers a search, or reports that the index is closed.
func (ix *Index) enter() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return false
	}
	ix.users.Add(1)
	return true
}

// Through is the log position the keyword index reflects.
func (ix *Index) Through() uint64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.through
}

func (ix *Index) advance(pos uint64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if pos <= ix.through {
		return
	}
	ix.through = pos
	close(ix.moved)
	ix.moved = make(chan struct{})
}

func (ix *Index) closedRefusal() error {
	return authority.Refuse(authority.Unavailable, "Search is shutting down on this node; nothing was searched. Search again once the node is back.")
}

// WaitFor returns once the keyword index reflects the projection through
// pos, or with ctx's error, or unavailable if the index closes first.
func (ix *Index) WaitFor(ctx context.Context, pos uint64) error {
	if ix.Through() >= pos {
		return nil
	}
	ix.waiting.Add(1)
	defer ix.waiting.Add(-1)
	select {
	case ix.kick <- struct{}{}:
	default:
	}
	for {
		ix.mu.Lock()
		through, moved := ix.through, ix.moved
		ix.mu.Unlock()
		if through >= pos {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-ix.done:
			return ix.closedRefusal()
		}
	}
}

// gather is how long the indexer lets changes accumulate before a round
// nobody is waiting for: every round is a bleve segment that its merger
// later rewrites, so a few large rounds cost far less than many small ones
// under a stream of writes. A search, or anyone else in WaitFor, cuts the
// wait short.
const gather = 200 * time.Millisecond

// roundMarks bounds one indexing round, so a long backlog (a node that
// was down while writes went on elsewhere) is indexed in batches of
// bounded memory. A variable so a test can make rounds small.
var roundMarks = 4096

// follow is the indexer: it waits for the projection to move past what the
// keyword index holds, indexes what the marks name, and repeats until the
// index closes. A failure is logged and retried from the same position, so
// no mark is skipped.
func (ix *Index) follow(ctx context.Context) {
	defer ix.wg.Done()
	backoff := 50 * time.Millisecond
	more := false // the last round left marks for the next
	for {
		if err := ix.opts.Node.WaitFor(ctx, ix.Through()+1); err != nil {
			if ctx.Err() == nil {
				ix.log.Error("search: the state node stopped; the keyword index stops following it", "kind", ix.opts.Kind, "err", err)
			}
			return
		}
		if !more && ix.waiting.Load() == 0 {
			t := time.NewTimer(gather)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-ix.kick:
			case <-t.C:
			}
			t.Stop()
		}
		var err error
		if more, err = ix.indexRound(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			ix.log.Error("search: indexing failed; retrying", "kind", ix.opts.Kind, "position", ix.Through(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// indexRound brings the keyword index from its position up to the
// projection's, or one round's worth of marks towards it; more says it
// stopped short.
func (ix *Index) indexRound(ctx context.Context) (more bool, err error) {
	from := ix.Through()
	var (
		through uint64
		ids     []string
		batch   = ix.bleve.NewBatch()
	)
	err = ix.opts.Node.View(func(r pebble.Reader) error {
		upTo, err := state.PositionOf(r)
		if err != nil || upTo <= from {
			through = from
			return err
		}
		marks, t, err := readMarks(r, ix.opts.Kind, from, upTo, roundMarks)
		if err != nil {
			return err
		}
		through, more = t, t < upTo
		seen := make(map[string]bool, len(marks))
		for _, m := range marks {
			if seen[m.id] {
				continue
			}
			seen[m.id] = true
			ids = append(ids, m.id)
			// The document as the snapshot holds it, which may be newer
			// than the mark: a later change has its own mark, and indexing
			// the same content twice is harmless.
			d, ok, err := ix.opts.Source(r, m.id)
			if err != nil {
				return fmt.Errorf("read %s %q: %w", ix.opts.Kind, m.id, err)
			}
			if !ok || d.Hidden {
				batch.Delete(m.id)
				continue
			}
			if err := batch.Index(m.id, toIndexed(d)); err != nil {
				return fmt.Errorf("index %s %q: %w", ix.opts.Kind, m.id, err)
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if len(ids) == 0 {
		// Nothing of this kind changed: the index already reflects the
		// projection through here. Nothing is written; after a restart
		// the same empty stretch is read again, which costs one scan.
		ix.advance(through)
		if w := ix.meaning.Load(); w != nil {
			w.hand(nil, through)
		}
		return more, nil
	}
	// The position goes into the same batch as the documents: bleve
	// persists both in one snapshot, so what it holds after a crash is a
	// position and exactly the documents indexed through it.
	batch.SetInternal(keyThrough, u64(through))
	batch.SetPersistedCallback(func(err error) {
		if err == nil {
			setMax(&ix.durable, through)
			ix.prune()
		}
	})
	if err := ix.bleve.Batch(batch); err != nil {
		return false, err
	}
	// A worker replaced after this hand is owed nothing: its successor's
	// sweep reads the projection after the replacement, so it finds what
	// this round indexed.
	if w := ix.meaning.Load(); w != nil {
		w.hand(ids, through)
	}
	ix.advance(through)
	return more, nil
}

// prune deletes the marks at or below the position bleve holds on disk:
// they are needed no more. It runs on bleve's persister, as each batch
// reaches the disk. A failed prune is harmless: the marks are never read
// again (reading starts after the index's position), and the next prune
// takes them.
func (ix *Index) prune() {
	ix.pruneMu.Lock()
	defer ix.pruneMu.Unlock()
	durable := ix.durable.Load()
	if durable <= ix.pruned {
		return
	}
	if err := ix.opts.Node.Keep(func(b *pebble.Batch) error { return pruneMarks(b, ix.opts.Kind, durable) }); err != nil {
		select {
		case <-ix.done:
		default:
			ix.log.Warn("search: pruning indexed marks failed", "kind", ix.opts.Kind, "through", durable, "err", err)
		}
		return
	}
	ix.pruned = durable
	close(ix.pruneMoved)
	ix.pruneMoved = make(chan struct{})
}

// setMax raises v to x unless it is already higher.
func setMax(v *atomic.Uint64, x uint64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
