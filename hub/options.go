package hub

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/grants"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FirstParty is a first-party server the hub mounts in-process. Its tools
// are filed as builtin.
type FirstParty struct {
	Name string
	// New builds the server; it must believe caller metadata only under the
	// trust it is given.
	New func(servers.Trust, Deps) *mcp.Server
	// Enabled says whether the company runs it (CAT-3, CAT-4); nil means
	// always. A server the company does not run registers no tool at all.
	Enabled func(*config.Company) bool
	// Absent says, for the log, what the company lacks when Enabled says
	// no; "the company does not run it" if empty.
	Absent string
}

// Leases says which seats this node holds. A per-role child is the seat's
// identity at its vendor, so it is restarted only while this node can prove
// it holds the seat's lease (MCP-10). One node holds every seat: the default.
type Leases interface {
	Holds(seat string) bool
}

type singleNode struct{}

func (singleNode) Holds(string) bool { return true }

// Fleet makes a hub one node of several sharing one company (FLT-1,
// FLT-2): seats are held under leases, spread over the nodes and moved
// when a node dies, and every node publishes a heartbeat carrying its MCP
// servers' state, from which GET /mcp-servers shows one cell per node.
type Fleet struct {
	// Node names this node in the fleet.
	Node string
	// Leases are the fleet's seat leases (state.Leases).
	Leases SeatLeases
	// Bus carries heartbeats (core NATS pub/sub on the fleet's NATS).
	Bus Bus
	// Heartbeat is how often this node publishes its heartbeat, places
	// seats, and asks again for a restart held back for a lease (MCP-10).
	Heartbeat time.Duration
	// ManualSeats leaves claiming and releasing seats to whoever runs
	// the agents (ClaimSeat, ReleaseSeat); unset, the node claims the free
	// agent seats it is the first choice for among the live nodes, and any
	// seat left free for two heartbeats.
	ManualSeats bool
	// Health, if set, reports the fleet's replicated streams for GET
	// /fleet (state.JetStreamLog.Health).
	Health func(ctx context.Context) []state.StreamHealth
	// Keys, if set, are the keys every node of the fleet shares
	// (state.FleetKeys): what one node signs or seals with them — a 2025
	// operator session's id — another opens. Unset, the node draws its
	// own, and only it opens what it sealed.
	Keys FleetKeys
	// Buckets, if set, opens the fleet's coordination buckets
	// (state.JetStreamLog): where a 2025 operator session is recorded, so
	// that any node serves it (mcp_sessions_fleet.go), and, with Keys,
	// where the seats' OAuth grants are sealed, so that a seat's next
	// holder has its grant (in Grants' stead). Unset, a session is served
	// only by the node that opened it, and grants are the node's own.
	Buckets FleetBuckets
}

// FleetKeys are the fleet's shared keys, by name (state.FleetKeys).
type FleetKeys interface {
	Key(ctx context.Context, name string) ([]byte, error)
}

// FleetBuckets opens the fleet's coordination buckets (state.JetStreamLog).
type FleetBuckets interface {
	TTLBucket(ctx context.Context, name string) (*state.TTLBucket, error)
	OpenSealedValues(ctx context.Context, bucket string, key []byte) (*state.SealedValues, error)
}

// SeatLeases is what a node of a fleet needs of the lease store.
type SeatLeases interface {
	Leases
	// Has reports whether the seat's lease may still be this node's (held,
	// proved or waiting for a renewal to prove it again).
	Has(seat string) bool
	// Claim takes the seat's lease for this node.
	Claim(ctx context.Context, seat string) error
	// Release lets the seat's lease go.
	Release(ctx context.Context, seat string) error
	// Holders maps every held seat to its node, as last seen.
	Holders() map[string]string
	// Holder asks the lease store itself which node holds the seat now
	// ("" if none): the answer for a seat whose holder went silent, when
	// what Holders last saw may be behind.
	Holder(ctx context.Context, seat string) (string, error)
	// Changed delivers when any of the above may have changed.
	Changed() <-chan struct{}
}

// Bus publishes and receives a fleet's events, and carries the questions
// a node asks the holder of a seat (fleet_ask.go).
type Bus interface {
	Publish(subject string, data []byte) error
	Subscribe(subject string, fn func(data []byte)) (stop func(), err error)
	// Request answers the first reply to a question; state.ErrNoAnswer
	// when nobody listens or replies within ctx.
	Request(ctx context.Context, subject string, data []byte) ([]byte, error)
	// Answer replies to every question on subject with what fn returns.
	Answer(subject string, fn func(data []byte) []byte) (stop func(), err error)
}

// Deps is what the hub lends a first-party server it mounts.
type Deps struct {
	// Directory returns the directory of the revision in force, per call.
	Directory func() *authority.Directory
	Logger    *slog.Logger
	// Company returns the revision in force, per call, for a server's
	// company-wide policy (artifacts.agents_manage_others).
	Company func() *config.Company
}

// Options configure a Hub. The zero value of every field but Company works.
type Options struct {
	Company *config.Company
	// Env resolves ${VAR} references; nil reads nothing.
	Env config.Lookup
	// DataDir is the data directory a command must name (--data-dir) to
	// reach the secret store Env reads, "" for the default one: the
	// command a server held for a missing value suggests names it, so the
	// value is sealed where this hub reads it.
	DataDir    string
	Logger     *slog.Logger
	FirstParty []FirstParty
	// AllowedHosts are Host header values accepted beside loopback names,
	// for a hub reached through a name (DNS-rebinding protection).
	AllowedHosts []string
	// AllowedOrigins are browser origins accepted beside loopback ones.
	AllowedOrigins []string
	// ListenURL is the scheme and address the hub listens on
	// (http://127.0.0.1:8420), known once it is bound: the resource
	// identity when the company sets no api.public_url. Nil or empty, the
	// hub has none but the configured one.
	ListenURL func() string
	// StartupWait bounds how long New waits for the shared MCP servers'
	// first starts; 10s if 0.
	StartupWait time.Duration
	// MaxBodyBytes bounds an operator request body; 0 means 4 MiB.
	MaxBodyBytes int64
	// Reload re-reads the company for POST /config/reload and SIGHUP; nil
	// means the company cannot be reloaded.
	Reload func() (*config.Company, error)
	// Applied is told each revision once it is in force, however it was
	// applied (at start, a reload, an edit through the API), for what
	// the node keeps outside the hub; nil tells nobody.
	Applied func(*config.Company)
	// Redact lists further values to redact from tool results (the secret
	// store's), asked on every apply.
	Redact func() []string
	// Leases is the seat-lease check; nil means this node holds every seat.
	// A Fleet brings its own.
	Leases Leases
	// Fleet, if set, makes this hub a node of a fleet; nil, it runs alone
	// and holds every seat.
	Fleet *Fleet
	// ConfigFile is the company file, which PUT /config/mcp-servers writes;
	// empty for the embedded company, which cannot be edited.
	ConfigFile string
	// Sanitizer redacts tool results; a new one if nil. Every apply gives
	// it the values the revision hands out (operator tokens, the secret
	// store, what each ${VAR} resolves to): a node passes the one its log
	// handler redacts with (sanitize.NewLogHandler), so the log is kept
	// free of the same values.
	Sanitizer *sanitize.Sanitizer
	// Ledger writes down the processes of every stdio child, so the node's
	// next start can end what a node killed outright left running; nil
	// writes nothing.
	Ledger *upstream.Ledger
	// SessionIdle closes a 2025 operator session that no request has used
	// for this long; 30 minutes if 0. Clients that go away without ending
	// their session would otherwise hold its memory for the hub's life.
	SessionIdle time.Duration
	// SessionGrace closes sooner a 2025 operator session whose client
	// sent nothing past its handshake, or whose event stream ended with
	// nothing open since (a client that exited without ending it, as the
	// MCP Inspector does); DefaultSessionGrace if 0, never past
	// SessionIdle.
	SessionGrace time.Duration
	// Observers watch the hub's calls and servers (metrics, traces); the
	// zero value watches nothing.
	Observers Observers
	// Metrics, when set, is served at GET /metrics behind the operator
	// token, like every other operator route.
	Metrics http.Handler
	// SecretNames lists the secret store's names (never a value), which
	// the screen's add-server form offers as ${NAME} pointers; nil offers
	// none.
	SecretNames func() []string
	// Artifacts builds the artifact store's file reader the hub serves
	// each artifact's current version with (GET /artifacts/{id}/...); nil
	// where the node takes no uploads, and the route answers 404.
	Artifacts func(Deps) ArtifactFiles
	// Pages builds the knowledge base's page trash the dashboard puts a
	// page in the trash with (DELETE /knowledge/pages/{id}) and lists a
	// person's trash from (GET /trash); nil where the node keeps no state.
	// The routes serve it only while restore_from_trash is served.
	Pages func(Deps) PageTrash

	// Pins keeps which third-party tool definitions people approved, on
	// the node's log (issue 28); its node must have toolpin.Projectors.
	// With it, a pinned server's tools are held until a person approves
	// them, and list_tool_changes and decide_tool_change are registered.
	// nil: no approval can be kept, so a server is pinned only if it says
	// trust: pinned, and its tools are then held for good.
	Pins *toolpin.Store
	// ScreenSessions keeps the screen's sign-ins, so they hold across a
	// restart and on every node of a fleet (issue 26); nil keeps them in
	// this process.
	ScreenSessions screen.Sessions
	// Grants keeps, sealed, the seats' OAuth grants for servers that say
	// auth: oauth (secrets.OpenGrants); nil: such a server's seats fail,
	// there being nowhere to keep a grant.
	Grants grants.Vault

	// artifactFiles is what Artifacts built, for the file route.
	artifactFiles ArtifactFiles
	// pageTrash is what Pages built, for the trash routes.
	pageTrash PageTrash
}

// DefaultSessionIdle is how long an unused 2025 operator session is kept.
const DefaultSessionIdle = 30 * time.Minute

// DefaultSessionGrace is how long a 2025 operator session is kept once its
// client looks gone: long enough for a client still there to open its
// stream again (the SDKs retry within seconds), short enough that a
// command-line client run in a loop leaves no trail of sessions.
const DefaultSessionGrace = time.Minute

// ensureDefaults fills what was left zero.
func (o *Options) ensureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Env == nil {
		o.Env = func(string) (string, bool) { return "", false }
	}
	if o.Fleet != nil {
		o.Leases = o.Fleet.Leases
		if o.Fleet.Heartbeat <= 0 {
			o.Fleet.Heartbeat = 15 * time.Second
		}
	}
	if o.Leases == nil {
		o.Leases = singleNode{}
	}
	if o.StartupWait == 0 {
		o.StartupWait = 10 * time.Second
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	if o.SessionGrace <= 0 {
		o.SessionGrace = DefaultSessionGrace
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.Sanitizer == nil {
		o.Sanitizer = sanitize.New()
	}
	if o.Observers.Servers == nil {
		o.Observers.Servers = noServers{}
	}
}
