package knowledge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/standalone"
	"github.com/crewlet/hub/servers/state"
)

// Deps is what the knowledge base needs from the node that serves it.
type Deps struct {
	// Node is the state node it writes through and reads from; it must
	// have been opened with Projectors().
	Node *state.Node
	// Directory answers the company as of the revision in force, per call.
	Directory func() *authority.Directory
	Logger    *slog.Logger
	// Now is the clock writes are stamped with; nil means time.Now.
	Now func() time.Time
	// Search is the pages' search index (OpenSearch); nil: search_knowledge
	// answers unavailable.
	Search *search.Index
}

// Name is the knowledge base's name as a first-party server.
const Name = "knowledge"

// Wakes answers up to limit of the knowledge base's wake rows after cursor
// ("" for the first): the watchers of a page somebody else changed or
// commented on. Subject is the page's id.
func Wakes(n *state.Node, after string, limit int) ([]servers.Wake, error) {
	return servers.Wakes(n, kWake, after, limit)
}

// Delivers is where knowledge writes put something in front of somebody:
// the pages every seat and person reads (WR-9).
const Delivers = "knowledge"

// NewServer serves the knowledge base's tools as a first-party MCP server
// that believes caller metadata only under trust.
func NewServer(d Deps, trust servers.Trust) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-knowledge", Version: servers.Version}, &mcp.ServerOptions{Logger: d.Logger})
	servers.Register(s, trust, d.Logger, Tools(d)...)
	return s
}

// Standalone is the knowledge base as `crewlet knowledge-mcp` runs it on
// its own: its search index lives under the data directory's state/search.
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

var (
	readHints  = servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	writeHints = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}
)

// srv is what one server keeps beside the node: nothing authoritative.
type srv struct {
	d Deps
	w *servers.Writes
}

func newSrv(d Deps) *srv {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Directory == nil {
		d.Directory = func() *authority.Directory { return authority.NewDirectory(nil, nil) }
	}
	w := servers.NewWrites(d.Node, servers.WritesOptions{Server: "the knowledge base", Look: "get_page, list_pages", Now: d.Now})
	return &srv{d: d, w: w}
}

// envelope starts the provenance envelope of one read answer.
func envelope() *servers.Envelope { return &servers.Envelope{Source: "Knowledge base data"} }

func (s *srv) dir() *authority.Directory {
	if d := s.d.Directory(); d != nil {
		return d
	}
	return authority.NewDirectory(nil, nil)
}

// pageFor is the page a call names by id, in a container the caller may
// use: a page nobody has is not_found, and one in a container kept from
// the page tools is refused as resolveContainer refuses it.
func (s *srv) pageFor(r pebble.Reader, c authority.Caller, id string) (*page, error) {
	p, err := readPage(r, id)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, authority.Refuse(authority.NotFound, "No page has the id %q.", id)
	}
	if _, err := s.resolveContainer(c, p.Container); err != nil {
		return nil, err
	}
	return p, nil
}

// resolveContainer decides which container a call is about: the one named,
// or the caller's own unit's space. A container no unit declares is the
// argument's fault (REF-3); one the engine keeps for itself is forbidden.
func (s *srv) resolveContainer(c authority.Caller, arg string) (string, error) {
	key := strings.ToUpper(strings.TrimSpace(arg))
	if key == "" {
		seat, ok := s.dir().Seat(c.Seat)
		var u authority.Unit
		if ok {
			u, ok = s.dir().Unit(seat.Unit)
		}
		if !ok || u.Space == "" {
			return "", authority.Refuse(authority.Invalid, "container is required: your unit keeps no space to default to. Name one (a unit's space).")
		}
		key = strings.ToUpper(u.Space)
	}
	if isReserved(key) {
		return "", authority.Refuse(authority.Forbidden, "%s is a container the engine keeps for itself; the page tools neither read nor write there.", key)
	}
	for _, u := range s.dir().Units() {
		if u.Space != "" && strings.EqualFold(u.Space, key) {
			return key, nil
		}
	}
	return "", authority.Refuse(authority.Invalid, "container %s is no unit's space in this company.", key)
}

// Trigger reads what a knowledge wake row woke its seat with: the comment
// on a page it follows, or the page as it stands after a change.
func Trigger(n *state.Node, w servers.Wake) (servers.Trigger, error) {
	var t servers.Trigger
	err := n.View(func(r pebble.Reader) error {
		p, err := readPage(r, w.Subject)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("knowledge: no page %s", w.Subject)
		}
		named := fmt.Sprintf("the page %q (%s)", p.Title, p.ID)
		if w.Comment > 0 {
			for _, c := range p.Comments {
				if c.ID == w.Comment {
					t = servers.Trigger{Text: c.Body, Author: c.By, About: "a comment on " + named + ", which you follow"}
					return nil
				}
			}
			return fmt.Errorf("knowledge: no comment %d on %s", w.Comment, p.ID)
		}
		by := p.CreatedBy
		if len(p.WrittenBy) > 0 {
			by = p.WrittenBy[len(p.WrittenBy)-1]
		}
		t = servers.Trigger{Text: p.Title + "\n\n" + p.Body, Author: by, About: "a change to " + named + ", which you follow"}
		return nil
	})
	return t, err
}
