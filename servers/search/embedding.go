package search

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// Bounds of the embedder's work.
const (
	embedRound = 256 // documents taken from the queue at once
	embedCall  = 32  // documents sent to the provider in one request
	// embedCallBytes bounds one request's inputs together: providers also
	// limit a request's total (OpenAI: 300,000 tokens).
	embedCallBytes = 256 << 10
	backoffFirst   = time.Second
	backoffMax     = time.Minute
)

// embedWorker keeps the kind's vectors in step with the keyword index: the
// indexer hands it the ids it indexed, and it embeds each one's current
// text, asynchronously, so a provider that is slow or down holds up
// nothing but meaning. On start it sweeps every document once, which is
// how vectors catch up after a crash, a rebuilt projection, or a change of
// model: an id the indexer handed before a crash is not remembered, but its
// digest no longer matches, or its vector is missing.
//
// A worker serves one model for its life; a change of model (SetEmbedder)
// replaces the worker, and with it the vectors in memory.
type embedWorker struct {
	ix    *Index
	e     Embedder
	model string
	vecs  *vectors
	stop  context.CancelFunc // set when it starts
	ended chan struct{}      // closed when run returns

	mu       sync.Mutex
	pending  map[string]struct{}
	inflight int
	handed   uint64 // the last position the indexer handed ids up to
	done     uint64 // vectors reflect the projection through here
	swept    bool
	// ready says meaning may rank with this worker's vectors: from the
	// start for the model a node opened with (a backlog is noted in the
	// answer), but after a change of model only once every document has
	// its vector of the new model, since until then most have none.
	ready bool
	down  error         // the provider's last failure, nil once it answers again
	moved chan struct{} // closed and replaced whenever done advances
	wake  chan struct{}
}

// newEmbedWorker is a worker for e, with the vectors of e's model the
// node's store holds; ready says whether meaning may rank with them before
// the worker has caught up.
func newEmbedWorker(ix *Index, e Embedder, ready bool) (*embedWorker, error) {
	vecs, err := loadVectors(ix.opts.Node, ix.opts.Kind, e.Model())
	if err != nil {
		return nil, fmt.Errorf("search: read the %s vectors: %w", ix.opts.Kind, err)
	}
	return &embedWorker{
		ix: ix, e: e, model: e.Model(), vecs: vecs, ready: ready,
		pending: map[string]struct{}{}, handed: ix.Through(),
		moved: make(chan struct{}), wake: make(chan struct{}, 1), ended: make(chan struct{}),
	}, nil
}

// isReady reports whether meaning may rank with the worker's vectors.
func (w *embedWorker) isReady() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready
}

// hand queues ids the keyword index has just indexed through position
// through.
func (w *embedWorker) hand(ids []string, through uint64) {
	w.mu.Lock()
	for _, id := range ids {
		w.pending[id] = struct{}{}
	}
	if through > w.handed {
		w.handed = through
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// backlog is how many documents wait for a vector.
func (w *embedWorker) backlog() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.swept {
		return -1 // not yet known
	}
	return len(w.pending) + w.inflight
}

func (w *embedWorker) setDown(err error) {
	w.mu.Lock()
	was := w.down
	w.down = err
	w.mu.Unlock()
	switch {
	case err != nil && was == nil:
		w.ix.log.Warn("search: the embeddings provider failed; documents wait for their vectors", "kind", w.ix.opts.Kind, "model", w.model, "err", err)
	case err == nil && was != nil:
		w.ix.log.Info("search: the embeddings provider answers again", "kind", w.ix.opts.Kind, "model", w.model)
	}
}

// take removes up to n ids from the queue; when it is empty, it marks the
// vectors as reflecting everything handed so far.
func (w *embedWorker) take(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, min(n, len(w.pending)))
	for id := range w.pending {
		if len(ids) == n {
			break
		}
		ids = append(ids, id)
		delete(w.pending, id)
	}
	w.inflight = len(ids)
	if len(ids) == 0 && w.swept {
		w.ready = true
	}
	if len(ids) == 0 && w.swept && w.handed > w.done {
		w.done = w.handed
		close(w.moved)
		w.moved = make(chan struct{})
	}
	return ids
}

// requeue puts back ids whose vectors could not be made.
func (w *embedWorker) requeue(ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.pending[id] = struct{}{}
	}
	w.inflight = 0
}

// errReplaced says a worker was replaced by one of another model while
// somebody waited on it.
var errReplaced = errors.New("search: the embeddings model was replaced")

// waitFor returns once the vectors reflect the projection through pos, or
// errReplaced once the worker has been replaced.
func (w *embedWorker) waitFor(ctx context.Context, pos uint64) error {
	for {
		w.mu.Lock()
		done, moved := w.done, w.moved
		w.mu.Unlock()
		if done >= pos {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.ix.done:
			return w.ix.closedRefusal()
		case <-w.ended:
			return errReplaced
		}
	}
}

// run is the embedder's goroutine.
func (w *embedWorker) run(ctx context.Context) {
	defer w.ix.wg.Done()
	defer close(w.ended)
	backoff := backoffFirst
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, backoffMax)
		return true
	}
	for {
		err := w.sweep(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		w.ix.log.Error("search: sweeping the vectors failed; retrying", "kind", w.ix.opts.Kind, "err", err)
		if !pause() {
			return
		}
	}
	backoff = backoffFirst
	for {
		ids := w.take(embedRound)
		if len(ids) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			}
			continue
		}
		failed, err := w.process(ctx, ids)
		if err == nil {
			w.requeue(nil)
			backoff = backoffFirst
			continue
		}
		w.requeue(failed)
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, errProvider) {
			w.ix.log.Error("search: keeping vectors failed; retrying", "kind", w.ix.opts.Kind, "err", err)
		}
		if !pause() {
			return
		}
	}
}

// sweep queues every document whose vector is missing, stale, in the wrong
// scope or of another model, and every vector whose document is gone.
func (w *embedWorker) sweep(ctx context.Context) error {
	queue := map[string]struct{}{}
	max := w.e.MaxInputBytes()
	var at uint64 // the position the sweep read the projection at
	err := w.ix.opts.Node.View(func(r pebble.Reader) error {
		var err error
		if at, err = state.PositionOf(r); err != nil {
			return err
		}
		seen := map[string]bool{}
		err = w.ix.opts.IDs(r, func(id string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			seen[id] = true
			d, ok, err := w.ix.opts.Source(r, id)
			if err != nil {
				return err
			}
			row, has := w.vecs.get(id)
			text := ""
			if ok && !d.Hidden {
				text = docText(d)
			}
			switch {
			case text == "":
				if has {
					queue[id] = struct{}{}
				}
			case !has || row.digest != textDigest(w.model, opening(text, max)) || row.scope != d.Scope:
				queue[id] = struct{}{}
			}
			return nil
		})
		if err != nil {
			return err
		}
		return scanVecRows(r, w.ix.opts.Kind, func(id string, _ vecRow) error {
			if !seen[id] {
				queue[id] = struct{}{}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	for id := range queue {
		w.pending[id] = struct{}{}
	}
	// What the sweep queued brings the vectors to the projection as it
	// read it, whatever the indexer handed so far: a worker that replaced
	// another owes nothing the indexer handed to the one before.
	if at > w.handed {
		w.handed = at
	}
	w.swept = true
	w.mu.Unlock()
	if len(queue) > 0 {
		w.ix.log.Info("search: documents to embed", "kind", w.ix.opts.Kind, "model", w.model, "documents", len(queue))
	}
	return nil
}

// errProvider marks a failure of the embeddings provider, as opposed to
// one of the node's own store.
var errProvider = errors.New("the embeddings provider failed")

type embedJob struct {
	id, input, scope string
	digest           digest
}

// process brings the vectors of ids up to date. It answers the ids whose
// vectors could not be made, to be tried again.
func (w *embedWorker) process(ctx context.Context, ids []string) (failed []string, err error) {
	max := w.e.MaxInputBytes()
	var (
		drop []string
		keep = map[string]vecRow{} // rows to write without calling the provider
		jobs []embedJob
	)
	err = w.ix.opts.Node.View(func(r pebble.Reader) error {
		for _, id := range ids {
			d, ok, err := w.ix.opts.Source(r, id)
			if err != nil {
				return err
			}
			text := ""
			if ok && !d.Hidden {
				text = docText(d)
			}
			if text == "" {
				drop = append(drop, id)
				continue
			}
			input := opening(text, max)
			dg := textDigest(w.model, input)
			if row, has := w.vecs.get(id); has && row.digest == dg {
				if row.scope != d.Scope {
					row.scope = d.Scope
					keep[id] = row
				}
				continue
			}
			jobs = append(jobs, embedJob{id: id, input: input, scope: d.Scope, digest: dg})
		}
		return nil
	})
	if err != nil {
		return ids, err
	}
	if len(drop) > 0 || len(keep) > 0 {
		if err := w.write(drop, keep); err != nil {
			return ids, err
		}
	}
	for len(jobs) > 0 {
		n, size := 0, 0
		for n < len(jobs) && n < embedCall && (n == 0 || size+len(jobs[n].input) <= embedCallBytes) {
			size += len(jobs[n].input)
			n++
		}
		call := jobs[:n]
		inputs := make([]string, n)
		for i, j := range call {
			inputs[i] = j.input
		}
		vecs, err := w.e.Embed(ctx, inputs)
		if err != nil {
			w.setDown(err)
			rest := make([]string, 0, len(jobs))
			for _, j := range jobs {
				rest = append(rest, j.id)
			}
			return rest, errors.Join(errProvider, err)
		}
		w.setDown(nil)
		rows := make(map[string]vecRow, n)
		for i, j := range call {
			normalize(vecs[i])
			rows[j.id] = vecRow{digest: j.digest, scope: j.scope, model: w.model, vec: vecs[i]}
		}
		if err := w.write(nil, rows); err != nil {
			rest := make([]string, 0, len(jobs))
			for _, j := range jobs {
				rest = append(rest, j.id)
			}
			return rest, err
		}
		jobs = jobs[n:]
	}
	return nil, nil
}

// write deletes the vectors of drop and writes rows, in the node's store
// first and then in memory, so memory never holds what the store does not.
func (w *embedWorker) write(drop []string, rows map[string]vecRow) error {
	kind := w.ix.opts.Kind
	err := w.ix.opts.Node.Keep(func(b *pebble.Batch) error {
		for _, id := range drop {
			if err := b.Delete(vecKey(kind, id), nil); err != nil {
				return err
			}
		}
		for id, row := range rows {
			if err := b.Set(vecKey(kind, id), encodeVecRow(row), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var r *authority.Refusal
		if errors.As(err, &r) {
			return errors.New("the state node is closing")
		}
		return err
	}
	for _, id := range drop {
		w.vecs.drop(id)
	}
	for id, row := range rows {
		w.vecs.put(id, row)
	}
	return nil
}

// WaitEmbedded returns once the vectors reflect the projection through
// pos: every document changed at or before it has the vector of its
// current text, or none if it has no text, is hidden or is gone — and the
// keyword index reflects it too. Without an embedder it is WaitFor. It
// waits as long as ctx allows while the provider is down.
func (ix *Index) WaitEmbedded(ctx context.Context, pos uint64) error {
	if err := ix.WaitFor(ctx, pos); err != nil {
		return err
	}
	for {
		w := ix.meaning.Load()
		if w == nil {
			return nil
		}
		if err := w.waitFor(ctx, pos); !errors.Is(err, errReplaced) {
			return err
		}
	}
}
