package agent

import (
	"github.com/crewlet/hub/servers/editdistance"
	"sort"
	"strings"

	"github.com/crewlet/hub/authority"
)

// Colleague is one seat as lookup_colleague shows it.
type Colleague struct {
	Handle string `json:"handle"`
	Role   string `json:"role"`
	Kind   string `json:"kind"`
	Unit   string `json:"unit,omitempty"`
	// Accounts are a person's contact ids; a withheld person shows none.
	Accounts []string `json:"accounts,omitempty"`
}

// How a query matched, strongest first.
const (
	byHandle    = "handle"
	byRole      = "role"
	byContactID = "contact_id"
	byPartial   = "partial"
	byFuzzy     = "fuzzy"
)

// matchColleagues resolves a query to seats. It tries exact matches on
// handle, role name and contact id first (case-insensitive); then any seat
// whose handle, role or contact id contains the query; then the seats within
// a small edit distance. The first tier that finds anything decides, so an
// exact handle is never drowned by fuzzy neighbours. More than one seat in
// that tier is an ambiguous answer, returned whole so the model picks rather
// than the engine guessing.
func matchColleagues(dir *authority.Directory, query string) (seats []authority.Seat, how string) {
	q := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(query), "@")))
	if q == "" {
		return nil, ""
	}
	all := dir.Seats()
	// ids lists what a seat can be named by. A withheld person's contact ids
	// name nobody, so they are never matched.
	ids := func(s authority.Seat) []string {
		if s.Withheld {
			return nil
		}
		return s.ContactIDs
	}
	tiers := []struct {
		how   string
		match func(authority.Seat) bool
	}{
		{byHandle, func(s authority.Seat) bool { return strings.EqualFold(s.Handle, q) }},
		{byRole, func(s authority.Seat) bool { return strings.EqualFold(s.Role, q) }},
		{byContactID, func(s authority.Seat) bool {
			return anyFold(ids(s), func(id string) bool { return strings.EqualFold(id, q) })
		}},
		{byPartial, func(s authority.Seat) bool {
			return contains(s.Handle, q) || contains(s.Role, q) || anyFold(ids(s), func(id string) bool { return contains(id, q) })
		}},
	}
	for _, tier := range tiers {
		var found []authority.Seat
		for _, s := range all {
			if tier.match(s) {
				found = append(found, s)
			}
		}
		if len(found) > 0 {
			return found, tier.how
		}
	}
	return fuzzy(all, q), byFuzzy
}

// fuzzy returns the seats whose handle or role is closest to q, within a
// tolerance that grows with the query's length: one typo in a short handle,
// about one in three characters in a long role name.
func fuzzy(all []authority.Seat, q string) []authority.Seat {
	limit := max(1, len([]rune(q))/3)
	best := limit + 1
	var found []authority.Seat
	for _, s := range all {
		d := min(editdistance.Between(q, strings.ToLower(s.Handle)), editdistance.Between(q, strings.ToLower(s.Role)))
		switch {
		case d < best:
			best, found = d, []authority.Seat{s}
		case d == best:
			found = append(found, s)
		}
	}
	if best > limit {
		return nil
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].Handle < found[j].Handle })
	return found
}

func contains(s, q string) bool { return strings.Contains(strings.ToLower(s), q) }

func anyFold(list []string, f func(string) bool) bool {
	for _, s := range list {
		if f(s) {
			return true
		}
	}
	return false
}

func colleagueOf(s authority.Seat) Colleague {
	c := Colleague{Handle: s.Handle, Role: s.Role, Kind: string(s.Kind), Unit: s.Unit}
	if !s.Withheld {
		c.Accounts = append([]string(nil), s.ContactIDs...)
	}
	return c
}
