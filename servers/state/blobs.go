package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Bytes a write carries (project files, artifact versions and assets) are
// kept apart from the log, in a blob store, because the log keeps
// everything it is given for good: a removal must be able to really delete
// content. The log carries a blob's name and digest; the projection records
// which blobs are live; a blob the projection frees is erased from the
// store, bytes and all.
//
// Naming. A blob's name is chosen by the writer and must be unique to the
// operation that puts it (its op_id serves), so no two operations share a
// blob, nothing needs counting, and a retried operation puts the very same
// blob again.

// Blobs is where bytes live. Implementations must really destroy what Erase
// is given: not unlink it while the bytes stay on disk.
type Blobs interface {
	// Put stores data under name. Putting a name again with the same bytes
	// is allowed (a retried operation).
	Put(ctx context.Context, name string, data []byte) error
	// Get returns a blob's bytes, or an error wrapping ErrNoBlob.
	Get(ctx context.Context, name string) ([]byte, error)
	// Erase destroys a blob's bytes where they are stored, then forgets
	// it. Erasing a name that is not there is not an error.
	Erase(ctx context.Context, name string) error
	// List names every blob held, with when it was put.
	List(ctx context.Context) ([]BlobInfo, error)
}

// BlobInfo is one blob a store holds.
type BlobInfo struct {
	Name string
	Put  time.Time
}

// ErrNoBlob marks a blob the store does not hold.
var ErrNoBlob = errors.New("state: no such blob")

// Digest is the SHA-256 a blob is verified by, in hex.
func Digest(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// Keys the projection keeps blob references under. They sit outside the
// reserved space so projectors can write them in their own batch, but only
// through HoldBlob and FreeBlob.
const (
	blobLive = "\x01state/blob/live/" // + name: held by something a projector wrote
	blobFree = "\x01state/blob/free/" // + name: released; its bytes are to be erased
)

// HoldBlob records, in a projector's batch, that the projection now
// refers to blob name.
func HoldBlob(b *pebble.Batch, name string) error {
	return b.Set([]byte(blobLive+name), nil, nil)
}

// FreeBlob records, in a projector's batch, that nothing refers to blob
// name any more: once the batch commits the node erases its bytes.
func FreeBlob(b *pebble.Batch, name string) error {
	if err := b.Delete([]byte(blobLive+name), nil); err != nil {
		return err
	}
	return b.Set([]byte(blobFree+name), nil, nil)
}

// DefaultBlobGrace is BlobGrace's default.
const DefaultBlobGrace = time.Hour

func (n *Node) noBlobs() error {
	return errors.New("state: this node has no blob store")
}

// PutBlob stores data under name and answers its digest. It is put before
// the operation that refers to it is written; if that operation never
// lands, the blob is an orphan the node erases once it is older than
// BlobGrace.
func (n *Node) PutBlob(ctx context.Context, name string, data []byte) (string, error) {
	if n.blobs == nil {
		return "", n.noBlobs()
	}
	if err := n.blobs.Put(ctx, name, data); err != nil {
		return "", fmt.Errorf("state: put blob %s: %w", name, err)
	}
	return Digest(data), nil
}

// Blob reads a blob and checks it against the digest it was written with:
// bytes that do not match are the node's fault, never handed on.
func (n *Node) Blob(ctx context.Context, name, digest string) ([]byte, error) {
	if n.blobs == nil {
		return nil, n.noBlobs()
	}
	data, err := n.blobs.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("state: read blob %s: %w", name, err)
	}
	if got := Digest(data); got != digest {
		return nil, fmt.Errorf("state: blob %s has digest %s, not the %s it was written with", name, got, digest)
	}
	return data, nil
}

// EraseFreed erases every blob the projection has freed. A write that frees
// blobs calls it once it is applied, so the bytes are gone when it
// answers; the node also runs it when it opens, for frees a stopped node
// left undone.
func (n *Node) EraseFreed(ctx context.Context) error {
	if n.blobs == nil || !n.enter() {
		return nil
	}
	defer n.users.Done()
	n.blobMu.Lock()
	defer n.blobMu.Unlock()
	it, err := n.db.NewIter(&pebble.IterOptions{LowerBound: []byte(blobFree), UpperBound: []byte(blobFree + "\xff")})
	if err != nil {
		return err
	}
	var names []string
	for it.First(); it.Valid(); it.Next() {
		names = append(names, string(it.Key()[len(blobFree):]))
	}
	if err := it.Close(); err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if err := n.blobs.Erase(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("erase blob %s: %w", name, err))
			continue
		}
		// The row only says what is left to erase. Deleting it is this
		// node's own bookkeeping, not a change to what the log decided: a
		// projection rebuilt from the log frees the blob again, and erasing
		// an absent blob is no error.
		if err := n.db.Delete([]byte(blobFree+name), pebble.NoSync); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// eraseOrphans erases blobs nothing refers to that are older than the
// grace: bytes put for an operation that never landed (its caller died, or
// its outcome stayed unknown and it was never repeated).
func (n *Node) eraseOrphans(ctx context.Context) error {
	if n.blobs == nil {
		return nil
	}
	n.blobMu.Lock()
	defer n.blobMu.Unlock()
	infos, err := n.blobs.List(ctx)
	if err != nil {
		return err
	}
	cut := time.Now().Add(-n.opts.BlobGrace)
	var errs []error
	for _, b := range infos {
		if b.Put.After(cut) {
			continue
		}
		_, closer, err := n.db.Get([]byte(blobLive + b.Name))
		if err == nil {
			closer.Close()
			continue
		}
		if !errors.Is(err, pebble.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		n.logger.Info("state: erasing a blob no operation refers to", "blob", b.Name, "put", b.Put)
		if err := n.blobs.Erase(ctx, b.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepBlobs is the node's blob keeper: it erases what was freed or
// orphaned while the node was down, then looks again every BlobGrace, until
// the node closes. A pass that failed is tried again soon, backing off,
// rather than a whole grace later: bytes meant to be gone stay only as
// long as the store keeps failing.
func (n *Node) sweepBlobs(ctx context.Context) {
	defer n.followerW.Done()
	retry := time.Second
	for {
		wait := n.opts.BlobGrace
		err := errors.Join(n.EraseFreed(ctx), n.eraseOrphans(ctx))
		if err != nil && ctx.Err() == nil {
			n.logger.Error("state: erasing blobs; trying again", "err", err, "in", retry)
			wait, retry = min(retry, wait), min(retry*2, time.Minute)
		} else {
			retry = time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// DiscardBlob erases a blob its writer put for an operation it then did
// not write (the call was refused after the bytes went in), unless the
// projection holds it. Only the writer can know the operation was never
// appended — a fresh operation refused before its append — so only it may
// call this; anything else is left to the orphan sweep.
func (n *Node) DiscardBlob(ctx context.Context, name string) error {
	if n.blobs == nil || !n.enter() {
		return nil
	}
	defer n.users.Done()
	n.blobMu.Lock()
	defer n.blobMu.Unlock()
	_, closer, err := n.db.Get([]byte(blobLive + name))
	if err == nil {
		closer.Close()
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	return n.blobs.Erase(ctx, name)
}
