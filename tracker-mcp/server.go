package tracker

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/standalone"
	"github.com/crewlet/hub/servers/state"
)

// Deps is what the tracker needs from the node that serves it.
type Deps struct {
	// Node is the state node the tracker writes through and reads from; it
	// must have been opened with Projectors().
	Node *state.Node
	// Directory answers the company as of the revision in force. It is
	// called per call, so a reload is seen by the next call.
	Directory func() *authority.Directory
	Logger    *slog.Logger
	// Now is the clock writes are stamped with; nil means time.Now.
	Now func() time.Time
	// Search is the items' search index (OpenSearch over Node); nil
	// answers search_work_items unavailable.
	Search *search.Index
}

// Name is the tracker's name as a first-party server.
const Name = "tracker"

// NewServer serves the tracker's tools as a first-party MCP server that
// believes caller metadata only under trust.
func NewServer(d Deps, trust servers.Trust) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-tracker", Version: servers.Version}, &mcp.ServerOptions{Logger: d.Logger})
	servers.Register(s, trust, d.Logger, Tools(d)...)
	return s
}

// Standalone is the tracker as `crewlet tracker-mcp` runs it on its own:
// its search index lives under the data directory's state/search.
var Standalone = standalone.Server{
	Name:       Name,
	Projectors: Projectors(),
	Open: func(ctx context.Context, r standalone.Resources) (any, io.Closer, error) {
		ix, err := OpenSearch(ctx, r.Node, filepath.Join(r.DataDir, "state", "search"), r.Embedder, r.Logger)
		if err != nil {
			return nil, nil, err
		}
		return ix, ix, nil
	},
	New: func(node *state.Node, dir func() *authority.Directory, log *slog.Logger, trust servers.Trust, deps any) *mcp.Server {
		ix, _ := deps.(*search.Index)
		return NewServer(Deps{Node: node, Directory: dir, Logger: log, Search: ix}, trust)
	},
}

// Delivers is where tracker writes put something in front of somebody: the
// board every seat and person reads (WR-9).
const Delivers = "tracker"

var (
	readHints  = servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	writeHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}
	// A whole-value write states the same thing however often it is made.
	wholeHints   = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	destroyHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.Yes, Idempotent: servers.No, OpenWorld: servers.No}
	// A write asked twice leaves what it left once (a pin, a read mark).
	idemHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
)

// srv is the state one server keeps beside the node: nothing here is
// authoritative, it only lets a retry on this node make the same proposal as
// the attempt it repeats.
type srv struct {
	d Deps
	w *servers.Writes

	mu sync.Mutex
	// minted remembers the key a create proposed under each operation, so
	// the repeat of a create whose answer was lost proposes the same key.
	minted map[state.OpID]string
	// reserved is the highest item number this node has proposed per
	// project, so two creates in flight on one node never propose one key.
	reserved map[string]int
}

func newSrv(d Deps) *srv {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Directory == nil {
		d.Directory = func() *authority.Directory { return authority.NewDirectory(nil, nil) }
	}
	w := servers.NewWrites(d.Node, servers.WritesOptions{Server: "the tracker", Look: "get_work_item, list_work_items", Now: d.Now})
	return &srv{d: d, w: w, minted: map[state.OpID]string{}, reserved: map[string]int{}}
}

// envelope starts the provenance envelope of one read answer.
func envelope() *servers.Envelope { return &servers.Envelope{Source: "Tracker data"} }

// ---- the directory ----

func (s *srv) dir() *authority.Directory {
	if d := s.d.Directory(); d != nil {
		return d
	}
	return authority.NewDirectory(nil, nil)
}

// unitProject finds the unit that declares a project key.
func (s *srv) unitProject(key string) (authority.Unit, bool) {
	for _, u := range s.dir().Units() {
		if u.Project != "" && strings.EqualFold(u.Project, key) {
			return u, true
		}
	}
	return authority.Unit{}, false
}

func declOf(u authority.Unit) projectDecl {
	return projectDecl{Key: strings.ToUpper(u.Project), Name: u.Name, Unit: u.ID, Lead: u.Lead}
}

// resolveProject decides which project a call is about: the one named, or
// the caller's own unit's. A project that exists neither in the directory
// nor on the board is the argument's fault.
func (s *srv) resolveProject(r pebble.Reader, c authority.Caller, arg string) (projectDecl, *project, error) {
	key := strings.ToUpper(strings.TrimSpace(arg))
	if key == "" {
		seat, ok := s.dir().Seat(c.Seat)
		var u authority.Unit
		if ok {
			u, ok = s.dir().Unit(seat.Unit)
		}
		if !ok || u.Project == "" {
			return projectDecl{}, nil, authority.Refuse(authority.Invalid, "project is required: your unit owns no project to default to. Name one (list_projects shows them).")
		}
		key = strings.ToUpper(u.Project)
	}
	p, err := readProject(r, key)
	if err != nil {
		return projectDecl{}, nil, err
	}
	if u, ok := s.unitProject(key); ok {
		return declOf(u), p, nil
	}
	if p != nil {
		return projectDecl{Key: p.Key, Name: p.Name, Unit: p.Unit, Lead: p.Lead}, p, nil
	}
	return projectDecl{}, nil, authority.Refuse(authority.Invalid, "project %s is no project of this company (list_projects shows them).", key)
}

// lead is a project's lead as the directory says now, falling back to the
// one recorded when the project was declared.
func (s *srv) lead(d projectDecl) string {
	if u, ok := s.unitProject(d.Key); ok {
		return u.Lead
	}
	return d.Lead
}

// mayLead reports whether the caller may do what a project's lead does:
// the lead, or an administrator (a person whose seat is one, or an
// administrator's credential).
func (s *srv) mayLead(c authority.Caller, d projectDecl) bool {
	if l := s.lead(d); l != "" && c.Kind != authority.KindOperator && strings.EqualFold(l, c.Seat) {
		return true
	}
	return authority.IsAdmin(c, s.dir())
}

// leadsAUnit reports whether the caller is a person who leads a unit.
func (s *srv) leadsAUnit(c authority.Caller) bool {
	if c.Kind != authority.KindHuman {
		return false
	}
	return slices.ContainsFunc(s.dir().Units(), func(u authority.Unit) bool { return strings.EqualFold(u.Lead, c.Seat) })
}

// seatArg checks that an argument names a seat, and answers its handle as
// the directory spells it. Naming nobody is the argument's fault (REF-3).
func (s *srv) seatArg(field, handle string) (string, error) {
	seat, ok := s.dir().Seat(strings.TrimSpace(handle))
	if !ok {
		return "", authority.Refuse(authority.Invalid, "%s names %q, and nobody in the company has that handle (lookup_colleague finds people).", field, handle)
	}
	return seat.Handle, nil
}

var mentionRE = regexp.MustCompile(`(?:^|[^\w@])@([A-Za-z0-9][A-Za-z0-9_.-]*)`)

// mentions finds the seats a text names as @handle; a name that is nobody's
// handle is left as text.
func (s *srv) mentions(body string) []string {
	var out []string
	for _, m := range mentionRE.FindAllStringSubmatch(body, -1) {
		h := strings.TrimRight(m[1], ".-")
		if seat, ok := s.dir().Seat(h); ok && !slices.Contains(out, seat.Handle) {
			out = append(out, seat.Handle)
		}
	}
	return out
}
