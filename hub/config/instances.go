package config

import "github.com/crewlet/hub/servers/upstream"

// Instance is one copy of a server a revision asks a node to run: the
// shared server itself, or one seat's child of a per-role template with
// the seat's credentials for it.
type Instance struct {
	Server MCPServer
	// Seat is the seat whose child this is; empty for a shared server.
	Seat string
	// Block is the seat's mcp_env for the server over its unit's; nil for
	// a shared server.
	Block *upstream.SeatBlock
}

// Instances lists every instance the revision declares, in declaration
// order: each shared server, and for each per-role template one child per
// agent seat with a block for it (CFG-5, CFG-6). A seat with no block gets
// no child, and people never do.
func (c *Company) Instances() []Instance {
	var out []Instance
	for _, d := range c.MCPServers {
		if d.IsShared() {
			out = append(out, Instance{Server: d})
			continue
		}
		for _, sb := range c.seatBlocks(d.Name) {
			out = append(out, Instance{Server: d, Seat: sb.seat, Block: &upstream.SeatBlock{Unit: sb.unit, Seat: sb.own}})
		}
	}
	return out
}

type seatBlock struct {
	seat      string
	unit, own map[string]string
}

// seatBlocks is the CFG-5 rule, written once: a unit's mcp_env block for a
// server is the base of each of its direct agent seats, the seat's own
// block over it; child units and people inherit nothing. Only seats that
// end up with a block are listed.
func (c *Company) seatBlocks(server string) []seatBlock {
	var out []seatBlock
	for _, u := range c.Units {
		unit := u.MCPEnv[server]
		for _, r := range u.Roles {
			own := r.MCPEnv[server]
			if r.kind() != "agent" || unit == nil && own == nil {
				continue
			}
			out = append(out, seatBlock{seat: r.Handle, unit: unit, own: own})
		}
	}
	for _, r := range c.Roles {
		if own := r.MCPEnv[server]; r.kind() == "agent" && own != nil {
			out = append(out, seatBlock{seat: r.Handle, own: own})
		}
	}
	return out
}

// blocksFor lists every block a server can be started with, for the rules
// checked when the document is written (CFG-4): each seat's, and a unit's
// block that no agent seat inherits, which is still the document's to get
// right.
func (c *Company) blocksFor(server string) []upstream.SeatBlock {
	var out []upstream.SeatBlock
	inherited := map[string]bool{}
	for _, sb := range c.seatBlocks(server) {
		out = append(out, upstream.SeatBlock{Unit: sb.unit, Seat: sb.own})
		inherited[sb.seat] = true
	}
	for _, u := range c.Units {
		unit := u.MCPEnv[server]
		if unit == nil {
			continue
		}
		reached := false
		for _, r := range u.Roles {
			reached = reached || inherited[r.Handle] && r.kind() == "agent"
		}
		if !reached {
			out = append(out, upstream.SeatBlock{Unit: unit})
		}
	}
	return out
}

// Declared is what the upstream rules (resolution, optional keys) read of
// an entry.
func (s MCPServer) Declared() upstream.Declared {
	return upstream.Declared{
		Name: s.Name, Transport: s.EffectiveTransport(), Command: s.Command, Args: s.Args,
		URL: s.URL, Shared: s.IsShared(), Env: s.Env, Headers: s.Headers,
		OptionalKeys: s.OptionalKeys, ToolPrefix: s.ToolPrefix,
	}
}

// ReferencedValues lists what every ${VAR} the revision's instances are
// started with resolves to, so a server that echoes its own credential
// back in a tool result does not hand it to the caller; and so do the
// model providers' keys.
func (c *Company) ReferencedValues(lookup Lookup) []string {
	out := c.providerValues(lookup)
	add := func(v string) {
		for _, name := range upstream.References(v) {
			if val, ok := lookup(name); ok && val != "" {
				out = append(out, val)
			}
		}
	}
	for _, in := range c.Instances() {
		add(in.Server.URL)
		maps := []map[string]string{in.Server.Env, in.Server.Headers}
		if in.Block != nil {
			maps = append(maps, in.Block.Unit, in.Block.Seat)
		}
		for _, m := range maps {
			for _, v := range m {
				add(v)
			}
		}
	}
	return out
}
