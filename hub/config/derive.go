package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/crewlet/hub/authority"
)

// TrackerBackend is the effective tracker backend (default native).
func (c *Company) TrackerBackend() string { return orDefault(c.Tracker.Backend, "native") }

// KnowledgeBackend is the effective knowledge backend (default native).
func (c *Company) KnowledgeBackend() string { return orDefault(c.Knowledge.Backend, "native") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Directory builds the company directory of seats and units.
func (c *Company) Directory() *authority.Directory {
	var seats []authority.Seat
	add := func(unit string, r Role) {
		seats = append(seats, authority.Seat{
			Handle:     r.Handle,
			Role:       r.Name,
			Kind:       authority.SeatKind(r.kind()),
			Unit:       unit,
			Admin:      r.Admin,
			ContactIDs: append([]string(nil), r.ContactIDs...),
			Withheld:   r.Withheld,
		})
	}
	var units []authority.Unit
	for _, u := range c.Units {
		units = append(units, authority.Unit{ID: u.ID, Name: u.Name, Type: u.Type, Lead: u.Lead,
			Project: u.Project, Space: u.Space, Parent: u.Parent})
		for _, r := range u.Roles {
			add(u.ID, r)
		}
	}
	for _, r := range c.Roles {
		add("", r)
	}
	return authority.NewDirectory(units, seats)
}

// Lookup resolves a variable; it reports false for a name that is unset.
type Lookup func(name string) (string, bool)

// OperatorTokenVar is the variable the generated operator credential is
// read from: the embedded company declares it, and a company that declares
// no credential of its own is given it (see Credentials).
const OperatorTokenVar = "CREWLET_OPERATOR_TOKEN"

// Credentials are the operator credentials the revision runs with: the ones
// it declares, or, when it declares none, the one the embedded company
// declares, so a hub started on any file can be reached. That credential is
// bound to the company's first administrator, as the embedded company's is,
// or is an administrator's own where the company has no person; generated
// reports which.
func (c *Company) Credentials() (tokens []Token, generated bool) {
	if len(c.API.Auth.Tokens) > 0 {
		return c.API.Auth.Tokens, false
	}
	t := Token{ID: "operator", Token: "${" + OperatorTokenVar + "}", Admin: true}
	for _, s := range c.Directory().Seats() {
		if s.Kind == authority.SeatHuman && s.Admin {
			t.Seat, t.Admin = s.Handle, false
			break
		}
	}
	return []Token{t}, true
}

// UsesGeneratedToken reports whether the revision's credentials read
// ${CREWLET_OPERATOR_TOKEN}, the token a hub generates and keeps in its data
// directory when the variable is not set: the embedded company's, and the
// one a company that declares none is given.
func (c *Company) UsesGeneratedToken() bool {
	tokens, _ := c.Credentials()
	for _, t := range tokens {
		if t.Token == "${"+OperatorTokenVar+"}" {
			return true
		}
	}
	return false
}

// OperatorTokens resolves the operator credentials against env. A variable
// that is unset or empty is a violation naming it: a token is never accepted
// as empty, which would let an empty bearer through.
func (c *Company) OperatorTokens(env Lookup) ([]authority.TokenEntry, error) {
	dir := c.Directory()
	var out []authority.TokenEntry
	var bad Violations
	tokens, _ := c.Credentials()
	for i, t := range tokens {
		m := wholeRefRe.FindStringSubmatch(t.Token)
		if m == nil {
			bad = append(bad, fmt.Sprintf("api.auth.tokens[%d].token: not a ${VARIABLE} reference", i))
			continue
		}
		v, ok := env(m[1])
		if !ok || strings.TrimSpace(v) == "" {
			bad = append(bad, fmt.Sprintf("api.auth.tokens[%d].token: the variable %s is not set (or is empty) in the hub's environment", i, m[1]))
			continue
		}
		e := authority.TokenEntry{ID: t.ID, Secret: v, Admin: t.Admin}
		if t.Seat != "" {
			s, _ := dir.Seat(t.Seat)
			e.Seat, e.Admin = s.Handle, s.Admin
		}
		out = append(out, e)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, bad
	}
	return out, nil
}
