package artifacts

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/standalone"
	"github.com/crewlet/hub/servers/state"
)

// Deps is what the artifact store needs from the node that serves it.
type Deps struct {
	// Node is the state node it writes through and reads from, opened
	// with Projectors(); its blob store keeps the bytes and its own
	// JetStream the presence rooms.
	Node *state.Node
	// Directory answers the company as of the revision in force, per call.
	Directory func() *authority.Directory
	Logger    *slog.Logger
	// Now is the clock writes are stamped with; nil means time.Now.
	Now func() time.Time
	// ManageOthers reads the company's artifacts.agents_manage_others per
	// call; nil means off.
	ManageOthers func() bool
	// BaseURL is where the hub serving artifacts is reached
	// ("http://127.0.0.1:8420"), read per answer; nil or empty, answers
	// carry the URL's path alone.
	BaseURL func() string
	// Sources are the engine's dashboard sources. nil: this node has none,
	// and list_dashboard_sources is not registered (CAT-3).
	Sources Sources
	// PresenceTTL is how long a seat stays in a room after its last
	// allowed call; 45 s if zero (ART-6).
	PresenceTTL time.Duration
	// Condense rewrites a long file's text to about budget bytes with the
	// reader's seat's auxiliary model, answering the rewrite and the
	// model's name. nil: no model condenses here, and a long file read
	// without an offset answers its first page.
	Condense func(ctx context.Context, c authority.Caller, text string, budget int) (condensed, model string, err error)
	// Builds reaches the box of a turn's coding run (source.sandbox); nil:
	// this node runs no sandbox, and source.sandbox is refused unavailable.
	Builds Builds
}

// Name is the artifact store's name as a first-party server.
const Name = "artifacts"

// DefaultPresenceTTL is how long a seat shows in an artifact's room.
const DefaultPresenceTTL = 45 * time.Second

// NewServer serves the artifact store's tools as a first-party MCP server
// that believes caller metadata only under trust.
func NewServer(d Deps, trust servers.Trust) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-artifacts", Version: servers.Version}, &mcp.ServerOptions{Logger: d.Logger})
	servers.Register(s, trust, d.Logger, Tools(d)...)
	return s
}

// Standalone is the artifact store as `crewlet artifacts-mcp` runs it. Its
// answers carry the URL path an artifact is viewed at on a hub; a
// standalone server serves no pages itself.
var Standalone = standalone.Server{
	Name:       Name,
	Projectors: Projectors(),
	New: func(node *state.Node, dir func() *authority.Directory, log *slog.Logger, trust servers.Trust, _ any) *mcp.Server {
		return NewServer(Deps{Node: node, Directory: dir, Logger: log}, trust)
	},
}

var (
	readHints = servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	// A write that adds (a version, an asset, rows).
	writeHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}
	// A write that states a whole value (a share, the schema, a title).
	wholeHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	// A write that may take something away (unshare; a schema dropping a
	// collection drops its rows).
	destroyHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.Yes, Idempotent: servers.Yes, OpenWorld: servers.No}
)

// Delivers is empty for every artifact tool (WR-9): publishing reaches
// nobody by itself; a seat posts the url with a tool that delivers.
const Delivers = ""

// srv is what one server keeps beside the node: nothing authoritative.
type srv struct {
	d Deps
	w *servers.Writes

	roomMu sync.Mutex
	rooms  *state.TTLBucket
}

func newSrv(d Deps) *srv {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Directory == nil {
		d.Directory = func() *authority.Directory { return authority.NewDirectory(nil, nil) }
	}
	if d.ManageOthers == nil {
		d.ManageOthers = func() bool { return false }
	}
	if d.BaseURL == nil {
		d.BaseURL = func() string { return "" }
	}
	if d.PresenceTTL <= 0 {
		d.PresenceTTL = DefaultPresenceTTL
	}
	w := servers.NewWrites(d.Node, servers.WritesOptions{Server: "the artifact store", Look: "get_artifact, list_artifacts", Now: d.Now})
	return &srv{d: d, w: w}
}

func (s *srv) dir() *authority.Directory {
	if d := s.d.Directory(); d != nil {
		return d
	}
	return authority.NewDirectory(nil, nil)
}

// envelope starts the provenance envelope of one read answer.
func envelope() *servers.Envelope { return &servers.Envelope{Source: "Artifact data"} }

// url is where the hub serves an artifact's current version: its main
// file at the bare URL, any other file of the version under it.
func (s *srv) url(id string) string {
	return strings.TrimSuffix(s.d.BaseURL(), "/") + "/artifacts/" + id + "/"
}

// ctxFor bounds the store's own side calls (a presence put) when the
// call's context has none.
func ctxFor(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, 5*time.Second)
}
