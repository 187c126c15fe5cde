package hub

// Freeze returns a registry offering exactly what r offers now, whatever
// is filed or withdrawn afterwards: a turn keeps the tool surface it
// started with, and the next turn sees the new one (CFG-7). Each tool
// still calls its server as it is then: a server a revision stopped
// answers unavailable, in the engine's words, rather than the tool
// vanishing under the turn (MCP-6).
func (r Registry) Freeze() Registry {
	out := Registry{company: snapshot(r.company), seat: r.seat}
	if r.own != nil {
		out.own = snapshot(r.own)
	}
	return out
}

// snapshot copies a catalogue as it is now.
func snapshot(c *Catalogue) *Catalogue {
	entries := c.Entries()
	s := &Catalogue{entries: entries, byName: make(map[string]int, len(entries))}
	for i, e := range entries {
		s.byName[e.Name] = i
	}
	return s
}
