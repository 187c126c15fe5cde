package state

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// streamName and streamSubject are the node's operation log. One
	// subject for operations: the log is one total order, and a position
	// is its sequence. A fleet's log also holds seat claims, one subject
	// per seat under claimPrefix, which fences look at.
	streamName    = "CREWLET_OPS"
	streamSubject = "crewlet.ops"
	claimPrefix   = "crewlet.claims."

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

	// fleetAckWait bounds how long a fleet's append waits for its
	// acknowledgement: longer than a leader election (up to 9 s).
	fleetAckWait = 15 * time.Second
)

// JetStreamLog is the default Log: a JetStream stream in a NATS server that
// runs inside this process and listens on no port. Every append is durable
// before it is acknowledged: on a single node, written to the log's journal
// and fsynced, a group of appends at a time (journal.go); in a fleet, where
// the same stream is replicated across the nodes' servers (see
// OpenCluster), fsynced by the servers themselves (SyncAlways: the
// default would leave up to two minutes of acknowledged writes in the page
// cache).
type JetStreamLog struct {
	ns     *server.Server // nil on an operator's NATS
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	// replicas is how many copies the fleet keeps of the log and of every
	// bucket beside it; 1 on a single node.
	replicas int
	// fences serialises a seat's fenced appends on this node: a clustered
	// stream refuses a second check on one claim key while the first is
	// still being replicated, which would turn a seat's own parallel
	// writes into refusals.
	fences keyedMutex
	// group and journal let concurrent appends share an fsync; nil where
	// every message is stored and fsynced by the server on its own (a
	// fleet, an operator's NATS, a stream made before the journal that
	// could not move onto it: see moveToJournal).
	group   *appendGroup
	journal *journal

	mu     sync.Mutex
	closed bool
	// done is closed by Close: the client does not fail acknowledgements
	// still awaited when its connection closes, so their waiters watch this.
	done chan struct{}
}

// OpenJetStream starts the embedded server with its store under dir and
// makes sure the operation stream exists.
func OpenJetStream(ctx context.Context, dir string) (*JetStreamLog, error) {
	return openJetStream(ctx, singleNode(dir))
}

// singleNode is the embedded log of one node, alone, with its store and
// its journal under dir.
func singleNode(dir string) logConfig {
	return logConfig{
		server: &server.Options{
			ServerName: "crewlet-state",
			DontListen: true,
			JetStream:  true,
			StoreDir:   dir,
			// Every stream is fsynced message by message but the journaled
			// operation stream, which persists asynchronously (journal.go).
			SyncAlways: true,
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
		},
		replicas: 1,
		subjects: []string{streamSubject},
		journal:  filepath.Join(dir, "journal"),
	}
}

// logConfig is how a JetStreamLog is reached: an embedded server (alone or
// routed to peers), or an operator's NATS at urls.
type logConfig struct {
	server   *server.Options
	urls     []string
	nats     []nats.Option
	replicas int
	subjects []string
	// ready bounds the wait for the embedded server to accept connections.
	ready time.Duration
	// journal, if set, is the directory of the journal of a single node's
	// embedded log.
	journal string
	// syncFiles makes the files under a directory durable; syncTree but
	// in tests, which watch when it runs or make it fail.
	syncFiles func(dir string) error
}

func openJetStream(ctx context.Context, c logConfig) (*JetStreamLog, error) {
	l := &JetStreamLog{done: make(chan struct{}), replicas: max(c.replicas, 1)}
	// Only a single node's embedded server journals: a fleet's stream
	// already syncs once per replicated batch.
	journaled := c.journal != "" && c.server != nil && l.replicas == 1
	var err error
	if c.server != nil {
		if l.ns, err = server.NewServer(c.server); err != nil {
			return nil, fmt.Errorf("state: configure embedded NATS: %w", err)
		}
		l.ns.Start()
		if c.ready <= 0 {
			c.ready = 10 * time.Second
		}
		if !l.ns.ReadyForConnections(c.ready) {
			l.shutdown()
			return nil, errors.New("state: embedded NATS did not become ready")
		}
		l.nc, err = nats.Connect("", append([]nats.Option{nats.InProcessServer(l.ns), nats.Name("crewlet-state"),
			// In process there is nobody to reconnect to once the server is gone.
			nats.NoReconnect()}, c.nats...)...)
		if err != nil {
			l.shutdown()
			return nil, fmt.Errorf("state: connect to embedded NATS: %w", err)
		}
	} else {
		l.nc, err = nats.Connect(strings.Join(c.urls, ","), c.nats...)
		if err != nil {
			return nil, fmt.Errorf("state: connect to NATS: %w", err)
		}
	}
	// An acknowledgement that never comes must still end the wait of
	// whoever no longer has a deadline of their own. In a fleet it does not
	// come when this node is cut off from the majority, and a write that
	// waits longer than a leader election is better answered unknown.
	ackWait := time.Minute
	if l.replicas > 1 {
		ackWait = fleetAckWait
	}
	l.js, err = jetstream.New(l.nc,
		jetstream.WithPublishAsyncMaxPending(asyncWindow),
		jetstream.WithPublishAsyncTimeout(ackWait))
	if err != nil {
		l.shutdown()
		return nil, fmt.Errorf("state: JetStream client: %w", err)
	}
	cfg := jetstream.StreamConfig{
		Name:       streamName,
		Subjects:   c.subjects,
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		Duplicates: dupWindow,
		MaxMsgSize: 8 << 20,
		Replicas:   l.replicas,
	}
	if journaled {
		// One rule for every data directory: a stream made before the
		// journal moves onto it before it is opened (see moveToJournal).
		cfg.PersistMode = jetstream.AsyncPersistMode
		if err := l.moveToJournal(ctx, c.journal); err != nil {
			l.shutdown()
			return nil, err
		}
	}
	err = untilReady(ctx, func(ctx context.Context) error {
		if journaled {
			// A stream's persist mode is fixed when it is made: one that
			// could not move keeps the server's fsync of each message.
			if s, err := l.js.Stream(ctx, streamName); err == nil {
				old := s.CachedInfo().Config
				cfg.PersistMode, cfg.AllowAtomicPublish = old.PersistMode, old.AllowAtomicPublish
			} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
		}
		var err error
		l.stream, err = l.js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err == nil && l.replicas > 1 {
		err = untilReady(ctx, l.streamLed)
	}
	if err != nil {
		l.shutdown()
		return nil, fmt.Errorf("state: create the operation stream: %w", err)
	}
	if journaled && cfg.PersistMode == jetstream.AsyncPersistMode {
		if err := l.openJournal(ctx, c); err != nil {
			l.shutdown()
			return nil, err
		}
	}
	return l, nil
}

// errNoLeader says a replicated stream has no leader yet.
var errNoLeader = fmt.Errorf("%w: the log has no leader yet", context.DeadlineExceeded)

// streamLed waits for the log to have a leader: a follower started before
// that can be handed a consumer that is not serving yet. (A stream another
// node is still creating answers not found for a moment: asked again.)
func (l *JetStreamLog) streamLed(ctx context.Context) error {
	info, err := l.stream.Info(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return errNoLeader
	}
	if err != nil {
		return err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return errNoLeader
	}
	return nil
}

// untilReady runs create until it succeeds or ctx ends. A single node's
// JetStream answers at once; a fleet's answers only once its nodes have
// elected a leader, which takes seconds after they meet, so an answer that
// JetStream is not ready yet is asked again.
//
// An attempt waits a second at first: a request made before the fleet has
// a leader is often not answered at all, so a long wait only delays the
// attempt that follows the election (attempts of 5 s made a three-node fleet take
// 16-21 s to join, attempts of 1 s 5 s). Every create here may be made
// again. Past the first attempts, each waits 5 s, for a machine too busy to
// answer within one.
func untilReady(ctx context.Context, create func(context.Context) error) error {
	for n := 0; ; n++ {
		wait := time.Second
		if n >= shortAttempts {
			wait = 5 * time.Second
		}
		attempt, cancel := context.WithTimeout(ctx, wait)
		err := create(attempt)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// shortAttempts is how many attempts of untilReady wait a second.
const shortAttempts = 15

// transient reports errors a fleet still forming answers: no leader yet,
// not enough peers for the replicas asked, nobody answering the API.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable
			10005, // insufficient resources: peers not yet there for the replicas
			10074, // no suitable peers for placement
			10076: // JetStream not enabled for account (yet)
			return true
		}
		return apiErr.Code == 503
	}
	return false
}

// Last is the stream's last sequence.
func (l *JetStreamLog) Last(ctx context.Context) (uint64, error) {
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Follow reads the stream through a consumer of its own, checking that
// deliveries are gapless: every delivery carries the consumer's own
// sequence, and one that skips (a pull answer lost on the way) ends Follow
// with an error, so the caller starts again after the last entry it took.
// A gap in stream positions is passed on as it is: the log no longer holds
// what was there.
//
// It is not the client's ordered consumer, whose own restarts wait for a
// consumer to be made again with no way to be cancelled: a follower whose
// fleet has lost its quorum would keep its node from ever closing.
func (l *JetStreamLog) Follow(ctx context.Context, from uint64, deliver func(Entry) error) error {
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckNonePolicy,
		MemoryStorage: true,
		Replicas:      1,
		// The server forgets a follower that stopped (its node closed or
		// restarted) on its own.
		InactiveThreshold: time.Minute,
	}
	if from > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	cons, err := l.stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if ctx.Err() != nil {
			return // closing: the inactive threshold removes it
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	opts := []jetstream.PullMessagesOpt{jetstream.WithMessagesErrOnMissingHeartbeat(true)}
	if l.replicas > 1 {
		// A fleet's follower can be handed a consumer that is not serving
		// yet (a leader moving, a replica catching up): short pulls with a
		// heartbeat each second notice it in about two seconds.
		opts = append(opts, jetstream.PullExpiry(2*time.Second))
	}
	it, err := cons.Messages(opts...)
	if err != nil {
		return err
	}
	defer it.Stop()
	var delivered uint64
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
		if md.Sequence.Consumer != delivered+1 {
			return fmt.Errorf("state: a delivery was lost (consumer sequence %d after %d)", md.Sequence.Consumer, delivered)
		}
		delivered = md.Sequence.Consumer
		if l.journal != nil {
			// Stored is not yet durable: the journal says when it is.
			if err := l.journal.waitDurable(ctx, md.Sequence.Stream, l.done); err != nil {
				return err
			}
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
	var stream jetstream.Stream
	err := untilReady(ctx, func(ctx context.Context) error {
		var err error
		stream, err = l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:       blobStream,
			Subjects:   []string{blobSubjects},
			Storage:    jetstream.FileStorage,
			Retention:  jetstream.LimitsPolicy,
			MaxMsgSize: blobChunk + 4096,
			Replicas:   l.replicas,
		})
		return err
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
	if l.journal != nil {
		l.journal.close()
	}
	return nil
}

func (l *JetStreamLog) shutdown() {
	if l.nc != nil {
		l.nc.Close()
	}
	if l.ns != nil {
		l.ns.Shutdown()
		l.ns.WaitForShutdown()
	}
}
