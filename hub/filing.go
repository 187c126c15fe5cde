package hub

import (
	"sort"

	"github.com/crewlet/hub/hub/toolscan"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// file files a server's listed tools in the catalogue they belong to (the
// company's for a shared server, the seat's own for a seat's child): its
// source, prefix, hints read from the raw annotations with the operator's
// overrides on top (CAT-9), where each delivers (CAT-8), and refuses the
// whole list if a name is taken (CAT-12), recording why for the server's
// row.
func (u *supervision) file(s *upstreamServer, tools []upstream.Tool) {
	// However the filing ends, the server's row and its tools read anew.
	defer u.events.serverChanged()
	if u.current(s) == nil {
		// A revision replaced this instance while it was starting.
		return
	}
	u.mu.Lock()
	decl := s.decl
	u.mu.Unlock()
	name, key := decl.Name, s.key()
	overrides := annotationOverrides(decl.ToolAnnotations)
	listed := map[string]bool{}
	src := SourceMCP(name)
	backend := &upstreamBackend{server: name, inst: func() *upstream.Instance { return u.instanceOf(key) }}
	entries := make([]Entry, 0, len(tools))
	cleaned := make([]*mcp.Tool, 0, len(tools))
	offeredTools := make([]upstream.Tool, 0, len(tools))
	var refusedNames []string
	for _, t := range tools {
		listed[t.Def.Name] = true
		// A name outside the protocol's recommended set is not offered
		// at all (issue 36): one that renders as another name, or holds
		// what nobody sees, would pass an approval as the tool it
		// imitates. The rest of the server's tools are offered.
		if ok, why := toolscan.ValidName(t.Def.Name); !ok {
			shown := toolscan.ShowName(t.Def.Name)
			u.log.Warn("tool_name_refused", "server", name, "seat", s.seat, "tool", shown, "reason", why)
			refusedNames = append(refusedNames, shown)
			continue
		}
		// What the server wrote of the tool is sanitised as its results
		// are, before any catalogue, model or client reads it (OUT-1).
		def, err := u.clean.Tool(t.Def)
		var e Entry
		if err == nil {
			e, err = entryFromTool(def, src, decl.ToolPrefix, backend)
		}
		if err != nil {
			u.log.Error("mcp_server_failed", "server", name, "seat", s.seat, "reason", err.Error())
			u.status.filed(key, s.inst, err.Error(), nil, nil)
			return
		}
		// The raw annotations, not the SDK's decoded booleans: an absent
		// hint is unknown (CAT-7).
		e.Hints = servers.HintsFromAnnotations(t.Annotations).Override(overrides[t.Def.Name])
		e.Delivers = mcpDelivers(name, decl.Delivers, e.Hints)
		// Who a tool is for is a first-party declaration; a third-party
		// server cannot narrow or widen it.
		e.OperatorOnly = false
		entries = append(entries, e)
		cleaned = append(cleaned, def)
		offeredTools = append(offeredTools, t)
	}
	var unlisted []string
	for tool := range overrides {
		if !listed[tool] {
			unlisted = append(unlisted, tool)
		}
	}
	sort.Strings(unlisted)
	u.log.Info("tools_discovered", "server", name, "seat", s.seat, "tools", len(entries), "unlisted_annotations", unlisted)

	u.fileMu.Lock()
	// A pinned server's tools no person approved as listed are filed held
	// (issue 28); read under fileMu, so no filing from pins read before a
	// decision lands after the refiling the decision brings.
	cat := u.company
	if s.seat != "" {
		cat = u.seatCatalogue(s.seat)
	}
	entries = u.pins.file(key, decl, s.seat, offeredTools, cleaned, entries, u.offeredBeside(cat, src))
	err := u.taken(s.seat, src, entries)
	if err == nil {
		err = cat.Replace(src, entries)
	}
	u.fileMu.Unlock()
	if err != nil {
		reason := err.Error() + ". The hub stopped it, since none of its tools can be offered; the next apply starts it again"
		u.log.Error("mcp_server_failed", "server", name, "seat", s.seat, "reason", reason)
		u.status.filed(key, s.inst, reason, unlisted, refusedNames)
		u.refuse(s)
		return
	}
	u.status.filed(key, s.inst, "", unlisted, refusedNames)
	if s.seat == "" {
		u.events.toolsChanged()
	}
}

// mcpDelivers is where a third-party tool delivers (CAT-8): nowhere when it
// is proven read-only, by its hints or an override; otherwise the surface
// its server's entry declares, or the server itself, since nothing else
// about the tool says where its call lands.
func mcpDelivers(server string, declared *string, h servers.Hints) string {
	switch {
	case h.ReadOnly == servers.Yes:
		return ""
	case declared != nil:
		return *declared
	}
	return string(SourceMCP(server))
}

// annotationOverrides reads tool_annotations in either spelling. The
// config check refuses any other key, so none is met here.
func annotationOverrides(m map[string]map[string]bool) map[string]servers.Hints {
	out := map[string]servers.Hints{}
	for tool, keys := range m {
		var h servers.Hints
		for k, v := range keys {
			switch k {
			case "read_only", "readOnlyHint":
				h.ReadOnly = servers.Of(v)
			case "destructive", "destructiveHint":
				h.Destructive = servers.Of(v)
			case "idempotent", "idempotentHint":
				h.Idempotent = servers.Of(v)
			case "open_world", "openWorldHint":
				h.OpenWorld = servers.Of(v)
			}
		}
		out[tool] = h
	}
	return out
}

// offeredBeside is every name offered beside src's tools, which a name of
// src's must not pass for (issue 36): the company catalogue's, and for a
// seat's child its seat's own catalogue's too, all but src's own.
func (u *supervision) offeredBeside(cat *Catalogue, src Source) []string {
	var out []string
	add := func(c *Catalogue) {
		for _, e := range c.Entries() {
			if e.Source != src {
				out = append(out, e.Name)
			}
		}
	}
	add(u.company)
	if cat != u.company {
		add(cat)
	}
	return out
}
