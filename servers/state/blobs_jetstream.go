package state

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// blobChunk is the size of the chunks a blob is stored in. Every chunk is
// one message the server fsyncs when it is put and overwrites in place
// when it is erased, so larger chunks make both cheaper.
const blobChunk = 1 << 20

// Blobs on JetStream are a plain stream the node addresses itself, not the
// client's object store: the object store's put starts an asynchronous
// publisher whose watcher goroutine can be left blocked for good when the
// put finishes before it is scheduled (a loaded machine leaked one per
// put), and its delete leaves the bytes in the store's files. Here every
// message is published synchronously and erased in place.
//
// Subjects, with NAME the blob's name in unpadded URL-safe base64 (names
// may hold dots, which separate subject tokens):
//
//	blob.NAME.c.I   chunk I of the blob's bytes
//	blob.NAME.m     its meta: size, digest, chunk count, when it was put
//
// The meta is published last, so a blob with no meta is one whose put did
// not finish: Get does not see it, List does (by its chunks' time), and the
// node's keeper erases it as an orphan.
const blobSubjects = "blob.>"

type blobMeta struct {
	Name   string    `json:"name"`
	Size   int       `json:"size"`
	Digest string    `json:"digest"`
	Chunks int       `json:"chunks"`
	Put    time.Time `json:"put"`
}

// jsBlobs is Blobs on a JetStream stream.
type jsBlobs struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

func blobToken(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }

func metaSubject(name string) string { return "blob." + blobToken(name) + ".m" }

func chunkSubject(name string, i int) string {
	return "blob." + blobToken(name) + ".c." + strconv.Itoa(i)
}

func (b *jsBlobs) meta(ctx context.Context, name string) (blobMeta, uint64, error) {
	m, err := b.stream.GetLastMsgForSubject(ctx, metaSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return blobMeta{}, 0, fmt.Errorf("%w: %s", ErrNoBlob, name)
	}
	if err != nil {
		return blobMeta{}, 0, err
	}
	var meta blobMeta
	if err := json.Unmarshal(m.Data, &meta); err != nil {
		return blobMeta{}, 0, fmt.Errorf("meta of blob %s: %w", name, err)
	}
	return meta, m.Sequence, nil
}

func (b *jsBlobs) Put(ctx context.Context, name string, data []byte) error {
	digest := Digest(data)
	if meta, _, err := b.meta(ctx, name); err == nil {
		if meta.Digest == digest {
			// A repeat of the same operation: the same bytes are there.
			return nil
		}
		// Other bytes under the name: erase them first, so nothing of
		// them outlives the put.
		if err := b.Erase(ctx, name); err != nil {
			return err
		}
	} else if !errors.Is(err, ErrNoBlob) {
		return err
	}
	chunks := 0
	for off := 0; off < len(data) || chunks == 0; off += blobChunk {
		end := min(off+blobChunk, len(data))
		if _, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: chunkSubject(name, chunks), Data: data[off:end]}); err != nil {
			return fmt.Errorf("put chunk %d of blob %s: %w", chunks, name, err)
		}
		chunks++
		if end == len(data) {
			break
		}
	}
	meta, err := json.Marshal(blobMeta{Name: name, Size: len(data), Digest: digest, Chunks: chunks, Put: time.Now().UTC()})
	if err != nil {
		return err
	}
	_, err = b.js.PublishMsg(ctx, &nats.Msg{Subject: metaSubject(name), Data: meta})
	return err
}

func (b *jsBlobs) Get(ctx context.Context, name string) ([]byte, error) {
	meta, _, err := b.meta(ctx, name)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, meta.Size)
	for i := range meta.Chunks {
		m, err := b.stream.GetLastMsgForSubject(ctx, chunkSubject(name, i))
		if err != nil {
			return nil, fmt.Errorf("read chunk %d of blob %s: %w", i, name, err)
		}
		data = append(data, m.Data...)
	}
	if len(data) != meta.Size {
		return nil, fmt.Errorf("blob %s holds %d bytes, its meta says %d", name, len(data), meta.Size)
	}
	return data, nil
}

// Erase overwrites every chunk of the blob where it is stored (a secure
// delete), then its meta.
func (b *jsBlobs) Erase(ctx context.Context, name string) error {
	subjects, err := b.subjects(ctx, "blob."+blobToken(name)+".>")
	if err != nil {
		return err
	}
	// Chunks first, the meta last: a blob whose erase was cut short is
	// still listed, and erased again.
	sort.Slice(subjects, func(i, j int) bool {
		return !strings.HasSuffix(subjects[i], ".m") && strings.HasSuffix(subjects[j], ".m")
	})
	for _, subj := range subjects {
		for {
			m, err := b.stream.GetLastMsgForSubject(ctx, subj)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return err
			}
			if err := b.stream.SecureDeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return fmt.Errorf("erase %s of blob %s: %w", subj, name, err)
			}
		}
	}
	return nil
}

// subjects lists the stream's subjects matching filter.
func (b *jsBlobs) subjects(ctx context.Context, filter string) ([]string, error) {
	info, err := b.stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(info.State.Subjects))
	for s := range info.State.Subjects {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// List names every blob with anything stored: a finished put by its
// meta's time, an unfinished one by its first chunk's.
func (b *jsBlobs) List(ctx context.Context) ([]BlobInfo, error) {
	subjects, err := b.subjects(ctx, blobSubjects)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []BlobInfo
	for _, s := range subjects {
		parts := strings.Split(s, ".")
		if len(parts) < 3 || seen[parts[1]] {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			continue
		}
		name := string(raw)
		seen[parts[1]] = true
		info := BlobInfo{Name: name}
		if meta, _, err := b.meta(ctx, name); err == nil {
			info.Put = meta.Put
		} else if m, err := b.stream.GetLastMsgForSubject(ctx, chunkSubject(name, 0)); err == nil {
			info.Put = m.Time
		} else {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}
