package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sourcegraph/conc"
)

// Tool is a tool an upstream server listed.
type Tool struct {
	Def *mcp.Tool
	// Annotations are the annotations as the server sent them, raw, so an
	// absent hint can be told from a false one.
	Annotations json.RawMessage
}

// State is where an instance is in its life.
type State string

const (
	StateStarting State = "starting"
	StateRunning  State = "running"
	// StateDown: it died or failed to start, and a retry is scheduled.
	StateDown State = "down"
	// StateFailed: it cannot launch as specified (no command, no url), so
	// nothing is retried until a revision changes the spec.
	StateFailed  State = "failed"
	StateStopped State = "stopped"
)

// Status is a snapshot of an instance for operators.
type Status struct {
	State       State
	Cause       string // what took it down, or why it failed
	Since       time.Time
	NextRestart time.Time // zero when none is scheduled
	Attempt     int
	Tools       int
	StderrTail  string
}

// Options configure an instance. Zero values work except Spec.
type Options struct {
	Spec Resolved
	// Version is the hub's version, which it names in every handshake
	// (MCP-3); "dev" if empty.
	Version string
	// Dir is a stdio child's working directory: the engine's own.
	Dir string
	// StartTimeout bounds connecting and listing tools (each); 60s if 0.
	StartTimeout time.Duration
	// ProbeTimeout bounds the server/discover probe before falling back to
	// initialize; 5s if 0.
	ProbeTimeout time.Duration
	// StopGrace is how long each gentle step of a stop waits; 2s if 0.
	StopGrace time.Duration
	Logger    *slog.Logger
	// Schedule is the restart schedule; a fresh default one if nil. It is
	// the instance's own from then on.
	Schedule *Schedule
	// Host is the engine's environment, from which only the allowlist
	// passes to a child; os.Environ() if nil.
	Host []string
	// OnTools is called from the instance's own goroutine with the tool
	// list of the first start, and afterwards only when a start lists
	// different tools (MCP-8).
	OnTools func([]Tool)
	// HTTPClient is the base client for http/sse servers.
	HTTPClient *http.Client
	// Seat is the seat a per-role child acts for; empty for a shared
	// server.
	Seat string
	// Lease reports whether this node still holds the seat's lease. It is
	// asked before every restart the instance makes on its own (MCP-10): a
	// child is the seat's identity, and a node that lost the seat must not
	// bring a second copy of it back. Nil means always (one node).
	Lease func() bool
	// Heartbeat is how long a held-back restart waits before asking the
	// lease again; 15s if 0.
	Heartbeat time.Duration
	// OnFeatures is called like OnTools with the server's resources,
	// templates and prompts.
	OnFeatures func(Features)
	// OnConnected is called from the instance's goroutine after every start
	// that brought the server up, first or restart.
	OnConnected func()
	// OnResourceUpdated is called when the server says a subscribed
	// resource changed.
	OnResourceUpdated func(context.Context, *mcp.ResourceUpdatedNotificationParams)
	// Ledger writes down a stdio child's processes for the node's next
	// start, in case this one dies without stopping them; nil writes
	// nothing.
	Ledger *Ledger
	// WatchTree is how often a stdio child's process tree is walked, to
	// know the processes that leave its group (setsid) before their parent
	// dies; 2s if 0.
	WatchTree time.Duration
	// OnStatus is called from the instance's goroutine after its state or
	// its cause changed, with the status before and after, so an operator's
	// screen and the node's metrics follow a server without polling it. It
	// must not block.
	OnStatus func(prev, now Status)
	// Hops is told of every call sent to the server (a tracer makes the
	// hop a span of its own); nil tells nobody.
	Hops HopObserver
}

// DownError is a call the instance could not serve because its server is
// not running, or stopped running while the call was in flight.
type DownError struct {
	Server      string
	Cause       string
	NextRestart time.Time
	// InFlight is set when the call had been sent and no answer came back:
	// it may have taken effect.
	InFlight bool
}

func (e *DownError) Error() string {
	return fmt.Sprintf("MCP server %s is not running: %s", e.Server, e.Cause)
}

// Instance is one supervised upstream server: a stdio child (its own process
// group) or a session with a remote URL. It watches the server from start to
// stop and restarts it on the schedule. Its goroutines are owned by it and
// ended by Close, which is safe to call more than once.
type Instance struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	status Status
	sess   *mcp.ClientSession
	ended  chan struct{} // closed when the current session is over
	// recorded is closed once the current session's end is in status, so
	// a call that failed under it can say what took the server down.
	recorded chan struct{}
	tools    []Tool
	child    *child
	started  bool // the server has been up at least once
	// link is the revision the first probe chose ("" for the stateless
	// one), remembered so restarts do not probe again; probed says it is
	// known.
	link     string
	probed   bool
	features Features
	flights  flights
	// calls carries the tool calls of the current session, set up as
	// callSetup says.
	calls     link
	callSetup linkSetup
	// listMu orders the hand-overs of tool lists to OnTools: a start's
	// and a listing again on the server's word (relist.go).
	listMu sync.Mutex

	// transport is the HTTP transport the instance made for itself, whose
	// idle connections it closes when it stops.
	transport *http.Transport
	retry     chan struct{}
	cancel    context.CancelFunc
	// wg owns the instance's goroutines: supervision and each session's
	// end watch. Close waits for all of them.
	wg   conc.WaitGroup
	once sync.Once
}

// Start begins supervising; it returns at once. Ready reports when the first
// start is over, whatever its outcome.
func Start(opts Options) *Instance {
	var ownTransport *http.Transport
	if opts.Schedule == nil {
		opts.Schedule = &Schedule{}
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 5 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 2 * time.Second
	}
	if opts.WatchTree <= 0 {
		opts.WatchTree = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Hops == nil {
		opts.Hops = noHops{}
	}
	if opts.Host == nil {
		opts.Host = os.Environ()
	}
	if opts.HTTPClient == nil {
		// The default transport's proxy settings and timeouts, with room
		// for many concurrent calls to one server.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		opts.HTTPClient = &http.Client{Transport: t}
		ownTransport = t
	}
	opts.Schedule.EnsureDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	i := &Instance{
		opts:      opts,
		log:       opts.Logger.With("server", opts.Spec.Name, "seat", opts.Seat),
		status:    Status{State: StateStarting, Since: time.Now()},
		retry:     make(chan struct{}, 1),
		cancel:    cancel,
		transport: ownTransport,
	}
	i.wg.Go(func() { i.supervise(ctx) })
	return i
}

// Status is a snapshot.
func (i *Instance) Status() Status {
	i.mu.Lock()
	defer i.mu.Unlock()
	s := i.status
	s.Tools = len(i.tools)
	if i.child != nil {
		s.StderrTail = i.child.tail.String()
	}
	return s
}

// Tools is the last tool list the server answered.
func (i *Instance) Tools() []Tool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.tools)
}

// Retry asks a down server to try again at once and starts its schedule
// afresh (MCP-9). A running server is left alone.
func (i *Instance) Retry() {
	i.opts.Schedule.Reset()
	select {
	case i.retry <- struct{}{}:
	default:
	}
}

// Close stops the server gently then firmly and ends supervision.
func (i *Instance) Close() error {
	i.once.Do(func() {
		i.cancel()
		// A panic in supervision is caught by the group and said here,
		// where the instance ends, rather than taking the hub down.
		if r := i.wg.WaitAndRecover(); r != nil {
			i.log.Error("server_supervision_panicked", "panic", r.String())
		}
		if i.transport != nil {
			i.transport.CloseIdleConnections()
		}
	})
	return nil
}

// setStatus changes the status through f, which runs under i.mu (so it may
// change what else goes with the status in one step), and tells OnStatus.
func (i *Instance) setStatus(f func(s *Status)) {
	i.mu.Lock()
	prev := i.status
	f(&i.status)
	now := i.status
	i.mu.Unlock()
	// Outside the lock: whoever is told may ask for Status.
	if i.opts.OnStatus != nil && (prev.State != now.State || prev.Cause != now.Cause) {
		i.opts.OnStatus(prev, now)
	}
}

// childPID is the current child's pid, 0 if none; for tests and status.
func (i *Instance) childPID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.child == nil {
		return 0
	}
	return i.child.pid()
}
