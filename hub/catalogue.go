package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Source says who registered a tool (CAT-1). It is recorded at registration
// because nothing about a tool afterwards tells a builtin from a server's.
type Source string

// SourceBuiltin is the source of every tool the engine ships: engine tools,
// first-party servers and agent-to-agent tools alike.
const SourceBuiltin Source = "builtin"

// SourceMCP is the source of a tool discovered on a third-party server. It
// names the template, never a seat's instance, so two seats' children of one
// template read as one integration.
func SourceMCP(server string) Source { return Source("mcp:" + server) }

// Backend answers calls for the tools of one server.
type Backend interface {
	// Call runs a tool by the name its server knows it by.
	Call(ctx context.Context, caller authority.Caller, tool string, args json.RawMessage) (*mcp.CallToolResult, error)
}

// Entry is one catalogue row.
type Entry struct {
	// Name is the name callers use: the server's name behind tool_prefix.
	Name        string
	Source      Source
	Description string
	Hints       servers.Hints
	// Delivers says where a call puts something in front of somebody
	// outside the turn; empty for a tool that reaches nobody (CAT-8).
	Delivers     string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// OperatorOnly marks a first-party tool people reach on the operator
	// surface and no seat is ever offered (TRK-6): a seat's registry leaves
	// it out, and a seat's call is refused forbidden before it runs (REF-5).
	OperatorOnly bool
	// Quarantine, if set, holds a third-party tool no person has approved
	// as its server now lists it (issue 28): it stays in the catalogue, so
	// GET /tools shows it and a call to it is refused in words that say
	// who must approve it, but no registry offers it.
	Quarantine *Quarantine

	// paramHeaders marks an input schema that puts arguments in HTTP
	// headers (x-mcp-header), which the SDK checks on a 2026-07-28 call:
	// such a call is left to it.
	paramHeaders bool
	// upstream is the tool's name at its server.
	upstream string
	backend  Backend
}

// ArgCount is how many arguments the input schema declares.
func (e Entry) ArgCount() int {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(e.InputSchema, &s)
	return len(s.Properties)
}

// Catalogue is an ordered set of tools with unique names. It is safe for
// concurrent use; readers get snapshots.
type Catalogue struct {
	mu      sync.RWMutex
	entries []Entry
	byName  map[string]int
}

// NewCatalogue returns an empty catalogue.
func NewCatalogue() *Catalogue { return &Catalogue{byName: map[string]int{}} }

// Add files entries. A name already filed is refused whole, never silently
// shadowed (CAT-12): nothing of the batch is filed if any name collides.
func (c *Catalogue) Add(entries ...Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	var clash []string
	for _, e := range entries {
		if i, ok := c.byName[e.Name]; ok {
			clash = append(clash, fmt.Sprintf("%s (already from %s)", e.Name, c.entries[i].Source))
		} else if seen[e.Name] {
			clash = append(clash, fmt.Sprintf("%s (twice in %s)", e.Name, e.Source))
		}
		seen[e.Name] = true
	}
	if len(clash) > 0 {
		return fmt.Errorf("tool name collision: %s; set a tool_prefix on one of the servers", strings.Join(clash, ", "))
	}
	for _, e := range entries {
		c.byName[e.Name] = len(c.entries)
		c.entries = append(c.entries, e)
	}
	return nil
}

// Replace swaps every tool of one source for entries, refusing the whole list
// if any name is held by another source (CAT-12). Entries keep the position
// of the source's first tool, so a restarted server's tools stay where they
// were.
func (c *Catalogue) Replace(src Source, entries []Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	var clash []string
	for _, e := range entries {
		if i, ok := c.byName[e.Name]; ok && c.entries[i].Source != src {
			clash = append(clash, fmt.Sprintf("%s (already from %s)", e.Name, c.entries[i].Source))
		} else if seen[e.Name] {
			clash = append(clash, fmt.Sprintf("%s (twice in %s)", e.Name, src))
		}
		seen[e.Name] = true
	}
	if len(clash) > 0 {
		return fmt.Errorf("tool name collision: %s; set a tool_prefix on one of the servers", strings.Join(clash, ", "))
	}
	at := len(c.entries)
	kept := make([]Entry, 0, len(c.entries)+len(entries))
	for i, e := range c.entries {
		if e.Source == src {
			at = min(at, i)
			continue
		}
		kept = append(kept, e)
	}
	at = min(at, len(kept))
	next := append(append(append([]Entry{}, kept[:at]...), entries...), kept[at:]...)
	c.entries = next
	c.byName = make(map[string]int, len(next))
	for i, e := range next {
		c.byName[e.Name] = i
	}
	return nil
}

// RemoveSource drops every tool of a source.
func (c *Catalogue) RemoveSource(src Source) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.Source != src {
			kept = append(kept, e)
		}
	}
	c.entries = kept
	c.byName = make(map[string]int, len(kept))
	for i, e := range kept {
		c.byName[e.Name] = i
	}
}

// Get finds a tool by name.
func (c *Catalogue) Get(name string) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i, ok := c.byName[name]
	if !ok {
		return Entry{}, false
	}
	return c.entries[i], true
}

// Entries is a snapshot in filing order.
func (c *Catalogue) Entries() []Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.entries)
}

// Registry is what one caller is offered: its own tools first, then the
// company's (CAT-10). A claimed seat's registry holds that seat's per-role
// children only, so two children of one template never share a catalogue
// (CAT-11), and leaves out the company's operator-only tools (TRK-6); the
// operator's registry is the company catalogue whole. A seat's own tool
// never shares a name with a company tool: filing refuses it (CAT-12), so
// the order only says where a name is looked up.
type Registry struct {
	own     *Catalogue // nil for a registry with no tools of its own
	company *Catalogue
	seat    bool
}

// CompanyRegistry offers the company catalogue alone: the operator's.
func CompanyRegistry(company *Catalogue) Registry { return Registry{company: company} }

// SeatRegistry offers a seat's own tools over the company catalogue.
func SeatRegistry(own, company *Catalogue) Registry {
	return Registry{own: own, company: company, seat: true}
}

// Resolve finds the tool a name means for this caller, own tools first.
// A held tool resolves though no registry offers it, so the router can
// refuse its call in words that say who must approve it (issue 28).
func (r Registry) Resolve(name string) (Entry, bool) {
	if r.own != nil {
		if e, ok := r.own.Get(name); ok {
			return e, true
		}
	}
	e, ok := r.company.Get(name)
	if !ok || e.Quarantine != nil || r.offers(e) {
		return e, ok
	}
	return Entry{}, false
}

// offers reports whether a company tool is offered to this caller: a
// held tool to nobody, an operator-only tool to no seat.
func (r Registry) offers(e Entry) bool { return e.Quarantine == nil && !(r.seat && e.OperatorOnly) }

// Entries lists what the caller is offered: own tools, then every company
// tool offered to it that they do not shadow.
func (r Registry) Entries() []Entry {
	var out []Entry
	seen := map[string]bool{}
	if r.own != nil {
		for _, e := range r.own.Entries() {
			seen[e.Name] = true
			if e.Quarantine == nil {
				out = append(out, e)
			}
		}
	}
	for _, e := range r.company.Entries() {
		if !seen[e.Name] && r.offers(e) {
			out = append(out, e)
		}
	}
	return out
}
