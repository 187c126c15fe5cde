package hub

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
)

// Name collisions (CAT-12) are refused, never settled by shadowing: at
// apply, for the names the tools servers listed so far would take under the
// revision (nameCollisions), and at filing, for a list a server answers
// (taken). Both say it in one sentence (collision).

// taken refuses entries whose names another catalogue a caller would see
// beside them already holds: for a seat's child, the company's; for a
// shared server, every seat's own (CAT-12). Within one catalogue, Replace
// refuses. Two seats' catalogues never meet, so their children of one
// template share names rightly. fileMu is held.
func (u *supervision) taken(seat string, src Source, entries []Entry) error {
	var clash []string
	check := func(other *Catalogue, owner func(Entry) string) {
		for _, e := range entries {
			if o, ok := other.Get(e.Name); ok {
				clash = append(clash, collision(e.Name, ownerOf(src, seat), owner(o)))
			}
		}
	}
	if seat != "" {
		check(u.company, func(o Entry) string { return string(o.Source) })
	} else {
		seats := u.seatCatalogues()
		names := make([]string, 0, len(seats))
		for s := range seats {
			names = append(names, s)
		}
		sort.Strings(names)
		for _, s := range names {
			check(seats[s], func(o Entry) string { return ownerOf(o.Source, s) })
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("%s", strings.Join(clash, "; "))
	}
	return nil
}

// nameCollisions lists every collision the revision would make among the
// tools known now: the builtins, and each instance's last listing under the
// revision's tool_prefix. A shared server's names meet the builtins' and
// each other's; a seat's child's meet the company's and its seat's other
// children's, never another seat's.
func nameCollisions(c *config.Company, filed []Entry, listings map[string][]upstream.Tool) []string {
	var out []string
	company := map[string]string{} // name -> whose
	for _, e := range filed {
		if e.Source == SourceBuiltin {
			company[e.Name] = string(SourceBuiltin)
		}
	}
	claim := func(in map[string]string, name, whose string) {
		if prev, ok := in[name]; ok && prev != whose {
			out = append(out, collision(name, prev, whose))
			return
		}
		in[name] = whose
	}
	instances := c.Instances()
	for _, in := range instances {
		if in.Seat != "" {
			continue
		}
		for _, t := range listings[instanceKey(in.Server.Name, "")] {
			claim(company, in.Server.ToolPrefix+t.Def.Name, string(SourceMCP(in.Server.Name)))
		}
	}
	seats := map[string]map[string]string{}
	for _, in := range instances {
		if in.Seat == "" {
			continue
		}
		own := seats[in.Seat]
		if own == nil {
			own = map[string]string{}
			seats[in.Seat] = own
		}
		whose := ownerOf(SourceMCP(in.Server.Name), in.Seat)
		for _, t := range listings[instanceKey(in.Server.Name, in.Seat)] {
			name := in.Server.ToolPrefix + t.Def.Name
			if prev, ok := company[name]; ok {
				out = append(out, collision(name, prev, whose))
				continue
			}
			claim(own, name, whose)
		}
	}
	return out
}

// ownerOf says whose a tool is, for a collision's sentence.
func ownerOf(src Source, seat string) string {
	if seat == "" {
		return string(src)
	}
	return fmt.Sprintf("%s (seat %s's own child)", src, seat)
}

// collision is the one sentence a name collision is said in, at apply and
// at filing alike: the name, and where each of its two tools comes from.
func collision(name, a, b string) string {
	return fmt.Sprintf("tool name collision: %q from %s and %q from %s; set a tool_prefix on the server so its tools get names of their own", name, a, name, b)
}
