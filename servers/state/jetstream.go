package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// streamName and streamSubject are the node's operation log. One
	// subject: the log is one total order, and a position is its sequence.
	streamName    = "CREWLET_OPS"
	streamSubject = "crewlet.ops"

	// blobStream holds the bytes writes carry (see blobs_jetstream.go).
	blobStream = "CREWLET_BLOBS"

	// asyncWindow bounds how many appends may wait for their
	// acknowledgement at once. Concurrent writers share the one connection
	// and the server stores their messages back to back, so a window lets
	// many writes ride on the server's loop without each caller waiting for
	// the previous one's fsync; the bound keeps memory finite when the disk
	// is slower than the writers.
	asyncWindow = 4096

	// dupWindow is how long JetStream itself remembers an op_id (its
	// default). The op ledger remembers for good; this only saves a
	// duplicate entry in the log for the common quick retry, and the server
	// keeps every id of the window in memory, so it stays short.
	dupWindow = 2 * time.Minute
)

// JetStreamLog is the default Log: a JetStream stream in a NATS server that
// runs inside this process and listens on no port. Every append is fsynced
// before it is acknowledged (SyncAlways); the server's default would leave up
// to two minutes of acknowledged writes in the page cache.
type JetStreamLog struct {
	ns     *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream

	mu     sync.Mutex
	closed bool
	// done is closed by Close: the client does not fail acknowledgements
	// still awaited when its connection closes, so their waiters watch this.
	done chan struct{}
}

// OpenJetStream starts the embedded server with its store under dir and
// makes sure the operation stream exists.
func OpenJetStream(ctx context.Context, dir string) (*JetStreamLog, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "crewlet-state",
		DontListen: true,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("state: configure embedded NATS: %w", err)
	}
	ns.Start()
	l := &JetStreamLog{ns: ns, done: make(chan struct{})}
	if !ns.ReadyForConnections(10 * time.Second) {
		l.shutdown()
		return nil, errors.New("state: embedded NATS did not become ready")
	}
	l.nc, err = nats.Connect("", nats.InProcessServer(ns), nats.Name("crewlet-state"),
		// In process there is nobody to reconnect to once the server is gone.
		nats.NoReconnect())
	if err != nil {
		l.shutdown()
		return nil, fmt.Errorf("state: connect to embedded NATS: %w", err)
	}
	l.js, err = jetstream.New(l.nc,
		jetstream.WithPublishAsyncMaxPending(asyncWindow),
		// An acknowledgement that never comes must still end the wait of
		// whoever no longer has a deadline of their own.
		jetstream.WithPublishAsyncTimeout(time.Minute))
	if err != nil {
		l.shutdown()
		return nil, fmt.Errorf("state: JetStream client: %w", err)
	}
	l.stream, err = l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       streamName,
		Subjects:   []string{streamSubject},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		Duplicates: dupWindow,
		MaxMsgSize: 8 << 20,
		Replicas:   1,
	})
	if err != nil {
		l.shutdown()
		return nil, fmt.Errorf("state: create the operation stream: %w", err)
	}
	return l, nil
}

// Append publishes msgs without waiting between them, then waits for every
// acknowledgement.
func (l *JetStreamLog) Append(ctx context.Context, msgs []Message) ([]uint64, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: %w", ErrNotAppended, ErrLogClosed)
	}
	if err := ctx.Err(); err != nil {
		// Whoever asked has gone already; do not start a write nobody will
		// hear the outcome of.
		return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
	}
	stall := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		stall = max(time.Until(dl), time.Millisecond)
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		msg := &nats.Msg{Subject: streamSubject, Data: m.Data, Header: nats.Header{}}
		opts := []jetstream.PublishOpt{jetstream.WithStallWait(stall)}
		if m.ID != "" {
			opts = append(opts, jetstream.WithMsgID(m.ID))
		}
		f, err := l.js.PublishMsgAsync(msg, opts...)
		if err != nil {
			// The client refused before sending (window full past the stall
			// wait, connection closed): this message did not leave. Earlier
			// ones did, so only a first failure is known not to be stored.
			if len(futures) == 0 {
				return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
			}
			return nil, err
		}
		futures = append(futures, f)
	}
	positions := make([]uint64, len(futures))
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			positions[i] = ack.Sequence
		case err := <-f.Err():
			var apiErr *jetstream.APIError
			if i == 0 && errors.As(err, &apiErr) {
				// The server answered, and its answer was no: not stored.
				return nil, fmt.Errorf("%w: %w", ErrNotAppended, err)
			}
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.done:
			// Sent, and maybe stored, but nobody is left to say.
			return nil, ErrLogClosed
		}
	}
	return positions, nil
}

// Last is the stream's last sequence.
func (l *JetStreamLog) Last(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Follow reads the stream through an ordered consumer: the client checks
// that deliveries are gapless and recreates the consumer from the last one
// it handed out when they are not, so deliver sees every entry in order.
func (l *JetStreamLog) Follow(ctx context.Context, from uint64, deliver func(Entry) error) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	cons, err := l.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if err := deliver(Entry{Position: md.Sequence.Stream, Data: m.Data()}); err != nil {
			return err
		}
	}
}

// Blobs is the blob store beside the log: a stream on the same embedded
// server whose Erase overwrites each stored chunk in place (a plain delete
// leaves the bytes in the store's files until it compacts them).
func (l *JetStreamLog) Blobs(ctx context.Context) (Blobs, error) {
	stream, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       blobStream,
		Subjects:   []string{blobSubjects},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxMsgSize: blobChunk + 4096,
		Replicas:   1,
	})
	if err != nil {
		return nil, fmt.Errorf("state: create the blob store: %w", err)
	}
	return &jsBlobs{js: l.js, stream: stream}, nil
}

// Close drains nothing: an append still waiting for its acknowledgement is
// answered with an error, which its writer reports as unknown.
func (l *JetStreamLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	l.shutdown()
	return nil
}

func (l *JetStreamLog) shutdown() {
	if l.nc != nil {
		l.nc.Close()
	}
	l.ns.Shutdown()
	l.ns.WaitForShutdown()
}
