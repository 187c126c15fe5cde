package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crewlet/hub/servers/upstream"
)

// Unset is one ${VAR} a revision references that the values it resolves
// from do not hold, or hold empty: where it is, and what a hub started
// without it does.
type Unset struct {
	Variable string
	// Where is the value's place in the company file, as a person finds
	// it: api.auth.tokens[0].token, mcp_servers[2] (github) env
	// GITHUB_TOKEN, providers.local.api_key.
	Where string
	// Empty: set, but to nothing, which is never passed on (CFG-3).
	Empty bool
	// Effect is what a hub started without it does.
	Effect string
	// Refuses: the hub does not start at all (an operator credential).
	Refuses bool
}

// String names the place, the variable and the consequence; never a value.
func (u Unset) String() string {
	state := "is neither in the hub's secret store nor in its environment"
	if u.Empty {
		state = "is set to an empty value, which the hub never passes on"
	}
	return fmt.Sprintf("%s: ${%s} %s; %s", u.Where, u.Variable, state, u.Effect)
}

// Unsets lists every ${VAR} the revision would resolve against env and
// could not, by the rules the hub resolves them with: its operator
// credentials (the generated one aside, which the hub makes), every
// instance of every MCP server (CFG-3, optional keys left out as they
// would be), and the providers of the models it names. Credentials first,
// then servers in declaration order, then providers by name.
func (c *Company) Unsets(env Lookup) []Unset {
	var out []Unset
	empty := func(name string) bool {
		v, ok := env(name)
		return ok && v == ""
	}

	generated := c.UsesGeneratedToken()
	tokens, _ := c.Credentials()
	for i, t := range tokens {
		m := wholeRefRe.FindStringSubmatch(t.Token)
		if m == nil || generated && m[1] == OperatorTokenVar {
			continue
		}
		if v, ok := env(m[1]); !ok || strings.TrimSpace(v) == "" {
			out = append(out, Unset{Variable: m[1], Where: fmt.Sprintf("api.auth.tokens[%d].token", i), Empty: ok,
				Effect: "the hub would not start, since it accepts no credential it cannot read", Refuses: true})
		}
	}

	index := map[string]int{}
	for i, s := range c.MCPServers {
		index[s.Name] = i
	}
	for _, in := range c.Instances() {
		// Resolve reports one variable a run; each found is taken as set
		// on the next, until the instance would start.
		found := map[string]bool{}
		lookup := func(name string) (string, bool) {
			if found[name] {
				return "set", true
			}
			return env(name)
		}
		for {
			_, hold := upstream.Resolve(in.Server.Declared(), in.Block, upstream.Lookup(lookup), "")
			if hold == nil || found[hold.Variable] {
				break
			}
			found[hold.Variable] = true
			where := fmt.Sprintf("mcp_servers[%d] (%s) ", index[in.Server.Name], in.Server.Name)
			switch {
			case hold.Key == "":
				where += "url"
			case in.Server.EffectiveTransport() == upstream.TransportStdio:
				where += "env " + hold.Key
			default:
				where += "header " + hold.Key
			}
			effect := "the server would not start (Failing, mcp_server_credential_missing)"
			if in.Seat != "" {
				where += " for seat " + in.Seat
				effect = "the seat's instance of the server would not start (Failing, mcp_server_credential_missing)"
			}
			out = append(out, Unset{Variable: hold.Variable, Where: where, Empty: empty(hold.Variable), Effect: effect})
		}
	}

	effects := map[string][]string{}
	use := func(provider, effect string) {
		if _, ok := c.Providers[provider]; ok && !contains(effects[provider], effect) {
			effects[provider] = append(effects[provider], effect)
		}
	}
	if e := c.Models.Embeddings; e != nil {
		use(e.Provider, "search would rank by keyword only")
	}
	const turns = "the turns of the seats on its chat models would fail"
	for _, m := range []*ModelRef{c.Models.Default, c.Models.Auxiliary} {
		if m != nil {
			use(m.Provider, turns)
		}
	}
	for _, r := range c.allRoles() {
		if provider, _, ok := strings.Cut(r.Model, "/"); ok && r.kind() == "agent" {
			use(provider, turns)
		}
	}
	names := make([]string, 0, len(effects))
	for name := range effects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := c.Providers[name]
		base := p.BaseURL
		if base == "" {
			base = providerAPIs[p.API]
		}
		for _, f := range []struct{ field, value string }{{"base_url", base}, {"api_key", p.APIKey}} {
			_, missing := upstream.Expand(f.value, upstream.Lookup(env))
			for _, v := range missing {
				out = append(out, Unset{Variable: v, Where: fmt.Sprintf("providers.%s.%s", name, f.field), Empty: empty(v),
					Effect: strings.Join(effects[name], ", and ")})
			}
		}
	}
	return out
}

// allRoles is every seat's role: the units' and the company-wide ones.
func (c *Company) allRoles() []Role {
	var out []Role
	for _, u := range c.Units {
		out = append(out, u.Roles...)
	}
	return append(out, c.Roles...)
}
