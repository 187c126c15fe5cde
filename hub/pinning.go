package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/hub/toolscan"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Quarantine says why a third-party tool is held (issue 28): no person has
// approved the definition its server lists now.
type Quarantine struct {
	// State is new (never approved), changed (the definition moved since
	// it was approved) or rejected (a person rejected this very
	// definition).
	State       string `json:"state"`
	Fingerprint string `json:"fingerprint"`
	// Flags are what the scanner found in the description; they inform
	// the person deciding and decide nothing.
	Flags []toolscan.Flag `json:"flags,omitempty"`

	// refusal is what a call to the tool answers (the router's, before
	// the call reaches any backend).
	refusal *authority.Refusal
}

// The states of a held tool.
const (
	heldNew      = "new"
	heldChanged  = "changed"
	heldRejected = "rejected"
)

// pinning is the hub's side of the pins: which servers are pinned, what
// the log says people approved, and what each instance listed when it was
// last filed, from which a filing marks the tools it must hold.
//
// Locking: mu guards every field below it. A filing reads the pins under
// supervision's fileMu, so a filing that read the pins before a decision
// has replaced its catalogue before the refiling the decision brings.
type pinning struct {
	// store is where approvals are kept; nil on a hub with no log, which
	// pins no server unless told to, and can approve nothing.
	store *toolpin.Store
	log   *slog.Logger

	mu       sync.Mutex
	pins     map[toolpin.Key]toolpin.Pin
	baseline map[string]bool
	// listed is each instance's last filing, by instance key.
	listed map[string]*pinListing
}

// pinListing is one instance's tools as pinning last read them.
type pinListing struct {
	server, seat string
	pinned       bool
	tools        []pinnedTool
}

// pinnedTool is one listed tool: its names, fingerprint, the definition a
// person is shown (sanitised, as a model would be offered it), the
// scanner's flags, and why it is held (nil when it is offered).
type pinnedTool struct {
	name, tool  string
	fingerprint string
	def         toolpin.Def
	flags       []toolscan.Flag
	hold        *Quarantine
}

func newPinning(store *toolpin.Store, log *slog.Logger) *pinning {
	return &pinning{store: store, log: log, pins: map[toolpin.Key]toolpin.Pin{}, baseline: map[string]bool{}, listed: map[string]*pinListing{}}
}

// start reads the log's baseline (writing it on the first start with
// pinning: the company's servers now, if the log held anything before)
// and the approvals, before any server files a tool.
func (p *pinning) start(ctx context.Context, c *config.Company) error {
	if p.store == nil {
		return nil
	}
	var names []string
	for _, s := range c.MCPServers {
		names = append(names, s.Name)
	}
	b, err := p.store.Baseline(ctx, names)
	if err != nil {
		return fmt.Errorf("hub: read the tool approvals' baseline: %w", err)
	}
	p.mu.Lock()
	for _, n := range b.Servers {
		p.baseline[n] = true
	}
	p.mu.Unlock()
	if b.Upgraded && len(b.Servers) > 0 {
		p.log.Info("tool_pinning_baseline", "servers", b.Servers,
			"reason", "these servers ran before pinning began; without a trust key they keep trust: auto")
	}
	return p.reload()
}

// reload reads the approvals from the log.
func (p *pinning) reload() error {
	if p.store == nil {
		return nil
	}
	pins, err := p.store.Pins()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.pins = pins
	p.mu.Unlock()
	return nil
}

// pinned reports whether a server's tools wait for a person's approval:
// as its trust key says; unset, unless the log's baseline names it, or
// the hub keeps no log to hold an approval on.
func (p *pinning) pinned(decl config.MCPServer) bool {
	switch decl.Trust {
	case config.TrustPinned:
		return true
	case config.TrustAuto:
		return false
	}
	if p.store == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.baseline[decl.Name]
}

// file reads a server's listing as it is filed: it fingerprints each tool,
// scans its description, and for a pinned server holds every tool whose
// fingerprint is not the approved one (a held entry stays in the
// catalogue, marked, with a backend that refuses it). It logs what moved
// since the instance's last filing (server_catalogue_changed, now naming
// changed tools and the scanner's flags), or what a first filing holds
// (tools_held). raw and cleaned are the server's tools as listed and as
// sanitised, in the order of entries.
func (p *pinning) file(key string, decl config.MCPServer, seat string, raw []upstream.Tool, cleaned []*mcp.Tool, entries []Entry, offered []string) []Entry {
	pinned := p.pinned(decl)
	now := &pinListing{server: decl.Name, seat: seat, pinned: pinned}
	for i, t := range raw {
		pt := pinnedTool{name: entries[i].Name, tool: t.Def.Name}
		fp, err := toolpin.Fingerprint(rawDef(t))
		if err != nil {
			// A server's schema the SDK decoded always encodes again; a
			// definition that cannot be read cannot be approved either.
			p.log.Error("tool_fingerprint_failed", "server", decl.Name, "tool", t.Def.Name, "error", err.Error())
		}
		pt.fingerprint = fp
		pt.def = toolpin.Def{Title: cleaned[i].Title, Description: entries[i].Description, InputSchema: entries[i].InputSchema,
			OutputSchema: entries[i].OutputSchema, Annotations: t.Annotations}
		var others []string
		names := slices.Clone(offered)
		for j, o := range entries {
			if j != i {
				others = append(others, o.Description)
				names = append(names, o.Name)
			}
		}
		// The name first: a name that passes for another offered one
		// (issue 36) is the first thing a reviewer must read twice.
		pt.flags = append(toolscan.Names(entries[i].Name, names),
			toolscan.Scan(toolscan.Tool{Name: t.Def.Name, Description: entries[i].Description, Params: toolscan.Params(entries[i].InputSchema)}, others)...)
		now.tools = append(now.tools, pt)
	}

	p.mu.Lock()
	for i := range now.tools {
		pt := &now.tools[i]
		if !pinned {
			continue
		}
		pin := p.pins[toolpin.Key{Server: decl.Name, Tool: pt.tool}]
		switch {
		case pt.fingerprint != "" && pin.Approved != nil && pin.Approved.Fingerprint == pt.fingerprint:
			continue
		case pt.fingerprint != "" && pin.Rejected != nil && pin.Rejected.Fingerprint == pt.fingerprint:
			pt.hold = &Quarantine{State: heldRejected}
		case pin.Approved == nil:
			pt.hold = &Quarantine{State: heldNew}
		default:
			pt.hold = &Quarantine{State: heldChanged}
		}
		pt.hold.Fingerprint, pt.hold.Flags = pt.fingerprint, pt.flags
	}
	before := p.listed[key]
	p.listed[key] = now
	p.mu.Unlock()

	out := slices.Clone(entries)
	for i, pt := range now.tools {
		if pt.hold == nil {
			continue
		}
		hold := *pt.hold
		hold.refusal = p.refusal(pt.name, decl.Name, hold.State)
		out[i].Quarantine = &hold
		// Should anything call the backend past the router's refusal,
		// nothing reaches the server either.
		out[i].backend = heldBackend{ref: hold.refusal}
	}
	p.report(decl.Name, seat, before, now)
	p.reportNames(decl.Name, seat, before, now)
	return out
}

// reportNames logs each tool a filing lists for the first time whose name
// reads as another offered name (issue 36), on any server: on a pinned
// one the reviewer sees the flag too, on a trusted one this line is all
// that says so.
func (p *pinning) reportNames(server, seat string, before, now *pinListing) {
	had := map[string]bool{}
	if before != nil {
		for _, t := range before.tools {
			had[t.tool] = true
		}
	}
	for _, t := range now.tools {
		if had[t.tool] {
			continue
		}
		for _, f := range t.flags {
			if f.Kind == toolscan.ConfusableName {
				p.log.Warn("tool_name_confusable", "server", server, "seat", seat, "tool", f.Text, "reason", f.Why)
			}
		}
	}
}

// rawDef is what a server said of a tool, as it said it: the fingerprint
// is of that, not of what the hub's sanitiser made of it.
func rawDef(t upstream.Tool) toolpin.Def {
	d := toolpin.Def{Title: t.Def.Title, Description: t.Def.Description, Annotations: t.Annotations}
	if t.Def.InputSchema != nil {
		d.InputSchema, _ = json.Marshal(t.Def.InputSchema)
	}
	if t.Def.OutputSchema != nil {
		d.OutputSchema, _ = json.Marshal(t.Def.OutputSchema)
	}
	return d
}

// report logs what a filing found: on a restart or a new listing, what
// was added, removed or changed, and on any filing what it holds, each
// with the scanner's flags.
func (p *pinning) report(server, seat string, before, now *pinListing) {
	flags := map[string][]string{}
	var held []string
	for _, t := range now.tools {
		if t.hold != nil {
			held = append(held, t.name)
		}
	}
	if before == nil {
		for _, t := range now.tools {
			if t.hold != nil && len(t.flags) > 0 {
				flags[t.name] = flagWords(t.flags)
			}
		}
		if len(held) > 0 {
			p.log.Warn("tools_held", "server", server, "seat", seat, "tools", held, "flags", flags,
				"reason", "no person has approved what the server lists; list_tool_changes shows them")
		}
		return
	}
	old := map[string]string{}
	for _, t := range before.tools {
		old[t.tool] = t.fingerprint
	}
	var added, removed, changed []string
	seen := map[string]bool{}
	for _, t := range now.tools {
		seen[t.tool] = true
		fp, had := old[t.tool]
		switch {
		case !had:
			added = append(added, t.name)
		case fp != t.fingerprint:
			changed = append(changed, t.name)
		default:
			continue
		}
		if len(t.flags) > 0 {
			flags[t.name] = flagWords(t.flags)
		}
	}
	for _, t := range before.tools {
		if !seen[t.tool] {
			removed = append(removed, t.name)
		}
	}
	if len(added)+len(removed)+len(changed) == 0 {
		return
	}
	p.log.Info("server_catalogue_changed", "server", server, "seat", seat, "added", added, "removed", removed,
		"changed", changed, "held", held, "flags", flags)
}

// flagWords writes flags for a log line: kind@start-end, and the
// parameter's field after the span for a flag in one
// (kind@start-end@/properties/city/description).
func flagWords(fs []toolscan.Flag) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%s@%d-%d", f.Kind, f.Start, f.End)
		if f.Field != "" {
			out[i] += "@" + f.Field
		}
	}
	return out
}

// refusal is what a call to a held tool answers: forbidden, in words that
// say what is held, that a person must approve it, and where.
func (p *pinning) refusal(name, server, state string) *authority.Refusal {
	const where = "an administrator reviews it with list_tool_changes and approves it with decide_tool_change, on the operator surface (/operator/mcp or /operator/act)"
	if p.store == nil {
		return authority.Refuse(authority.Forbidden,
			"The tool %q of server %s is held: the server is pinned, so a person must approve each of its tools, and this hub node keeps no log to record an approval on. Nothing was sent to the server; ask an administrator to run the hub with its state, or to set trust: auto on the server.", name, server)
	}
	switch state {
	case heldChanged:
		return authority.Refuse(authority.Forbidden,
			"The tool %q is held: server %s now describes it differently from the definition a person approved, and a person must approve the change before it is offered again (%s). Nothing was sent to the server.", name, server, where)
	case heldRejected:
		return authority.Refuse(authority.Forbidden,
			"The tool %q is held: a person rejected what server %s now says of it, and it stays out until a person approves a definition the server lists (%s). Nothing was sent to the server.", name, server, where)
	}
	return authority.Refuse(authority.Forbidden,
		"The tool %q of server %s is new and held until a person approves it (%s). Nothing was sent to the server.", name, server, where)
}

// heldBackend answers every call to a held tool with its refusal; nothing
// reaches the server.
type heldBackend struct{ ref *authority.Refusal }

func (b heldBackend) Call(context.Context, authority.Caller, string, json.RawMessage) (*mcp.CallToolResult, error) {
	return servers.Refused(b.ref), nil
}

// heldNow is every held tool of an instance still in force, by instance
// key, sorted by server, seat and tool name.
func (p *pinning) heldNow(live func(key string) bool) []pinnedHeld {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pinnedHeld
	for key, l := range p.listed {
		if !live(key) {
			delete(p.listed, key)
			continue
		}
		for _, t := range l.tools {
			if t.hold != nil {
				out = append(out, pinnedHeld{server: l.server, seat: l.seat, pinnedTool: t,
					pin: p.pins[toolpin.Key{Server: l.server, Tool: t.tool}]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return strings.Join([]string{a.server, a.tool, a.seat}, "\x00") < strings.Join([]string{b.server, b.tool, b.seat}, "\x00")
	})
	return out
}

// pinnedHeld is a held tool with what the log says of it.
type pinnedHeld struct {
	server, seat string
	pinnedTool
	pin toolpin.Pin
}

// pinnedKeys are the instances of pinned servers pinning has read.
func (p *pinning) pinnedKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for key, l := range p.listed {
		if l.pinned {
			out = append(out, key)
		}
	}
	return out
}

// refilePinned files again every running instance of a pinned server, so
// a decision (made here or on another node) holds or releases its tools.
func (u *supervision) refilePinned() {
	var tasks []func()
	for _, key := range u.pins.pinnedKeys() {
		u.mu.Lock()
		s := u.byName[key]
		u.mu.Unlock()
		if s == nil || s.inst == nil || s.inst.Status().State == upstream.StateStopped {
			continue
		}
		tasks = append(tasks, func() { u.file(s, s.inst.Tools()) })
	}
	fanOut(u.log, "refile pinned catalogues", tasks...)
}

// live reports whether an instance key is in force with an instance.
func (u *supervision) live(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.byName[key]
	return s != nil && s.inst != nil
}

// refreshPins reads the approvals again and refiles what they hold: after
// a decision here, or when the log brings one from another node.
func (h *Hub) refreshPins() {
	if err := h.pins.reload(); err != nil {
		h.log.Error("tool_approvals_unreadable", "error", err.Error())
		return
	}
	h.servers.refilePinned()
}

// toolChanges lists the held tools for list_tool_changes: one change per
// server, tool and fingerprint, naming the seats whose own children list
// it.
func (h *Hub) toolChanges() []toolpin.Change {
	var out []toolpin.Change
	at := map[string]int{}
	for _, t := range h.pins.heldNow(h.servers.live) {
		k := t.server + "\x00" + t.tool + "\x00" + t.fingerprint
		i, seen := at[k]
		if !seen {
			i = len(out)
			at[k] = i
			out = append(out, toolpin.Describe(t.server, t.tool, t.name, t.hold.State, t.fingerprint, t.def, t.pin, t.flags))
		}
		if t.seat != "" {
			out[i].Seats = append(out[i].Seats, t.seat)
		}
	}
	return out
}

// toolChangesServer is the first-party server of list_tool_changes and
// decide_tool_change, on a hub that keeps approvals.
func (h *Hub) toolChangesServer() FirstParty {
	return FirstParty{Name: "tool_changes", New: func(t servers.Trust, d Deps) *mcp.Server {
		return toolpin.NewServer(toolpin.Deps{Store: h.opts.Pins, Directory: d.Directory, Held: h.toolChanges, Refresh: h.refreshPins}, t, d.Logger)
	}}
}
