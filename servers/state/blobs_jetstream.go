package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// blobChunk is the size of the chunks a blob is stored in. Every chunk is
// one message the server fsyncs when it is put and overwrites in place
// when it is erased, so larger chunks make both cheaper: a 1 MiB file is
// one message rather than the store's default eight.
const blobChunk = 1 << 20

// jsBlobs is Blobs on a JetStream object store.
type jsBlobs struct {
	obs    jetstream.ObjectStore
	stream jetstream.Stream
}

func (b *jsBlobs) Put(ctx context.Context, name string, data []byte) error {
	// Putting over an existing object purges its old chunks without
	// erasing them; a repeat of the same operation has the same bytes, so
	// keep what is there instead.
	if old, err := b.obs.GetInfo(ctx, name); err == nil && old.Digest == objectDigest(data) {
		return nil
	}
	_, err := b.obs.Put(ctx, jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: blobChunk}}, bytes.NewReader(data))
	return err
}

func (b *jsBlobs) Get(ctx context.Context, name string) ([]byte, error) {
	data, err := b.obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoBlob, name)
	}
	return data, err
}

func (b *jsBlobs) Erase(ctx context.Context, name string) error {
	info, err := b.obs.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.Chunks > 0 {
		// Overwrite every chunk where it is stored, then delete the object.
		cons, err := b.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{fmt.Sprintf("$O.%s.C.%s", info.Bucket, info.NUID)},
		})
		if err != nil {
			return err
		}
		for range info.Chunks {
			m, err := cons.Next(jetstream.FetchContext(ctx))
			if err != nil {
				return fmt.Errorf("read chunk of %s: %w", name, err)
			}
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if err := b.stream.SecureDeleteMsg(ctx, md.Sequence.Stream); err != nil {
				return fmt.Errorf("erase chunk of %s: %w", name, err)
			}
		}
	}
	if err := b.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}

func (b *jsBlobs) List(ctx context.Context) ([]BlobInfo, error) {
	infos, err := b.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]BlobInfo, 0, len(infos))
	for _, i := range infos {
		out = append(out, BlobInfo{Name: i.Name, Put: i.ModTime})
	}
	return out, nil
}

// objectDigest is the digest the object store records for data.
func objectDigest(data []byte) string {
	h := sha256.New()
	h.Write(data)
	return jetstream.GetObjectDigestValue(h)
}
