package launch

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// CheckOptionalKeys is the write-time check of a server's optional_keys and
// of its header spellings. blocks are every unit's and seat's mcp_env blocks
// for the server (one SeatBlock per seat, its unit's block beside its own).
// It returns every violation, each a sentence naming the server and the key,
// sorted and without repeats; none means the document may be written.
//
// An entry that can never leave anything out is refused rather than
// accepted silently: the operator believes a key is optional when it is in
// fact still required, and finds out only when a host lacking the value
// refuses to start the server.
func CheckOptionalKeys(d Declared, blocks []SeatBlock) []string {
	tr := normTransport(d)
	headers := tr != TransportStdio
	base := d.Env
	if headers {
		base = d.Headers
	}
	seen := map[string]bool{}
	var out []string
	add := func(format string, a ...any) {
		s := fmt.Sprintf(format, a...)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}

	// Every map a value the server is started with may come from.
	sources := []map[string]string{base}
	for _, b := range blocks {
		sources = append(sources, b.Unit, b.Seat)
	}
	carried := map[string][]string{} // folded key -> every value written for it
	usedBy := map[string][]string{}  // variable -> keys whose values reference it
	for _, m := range sources {
		for _, k := range sortedKeys(m) {
			f := foldKey(k, headers)
			carried[f] = append(carried[f], m[k])
			for _, v := range refs(m[k]) {
				if !slices.Contains(usedBy[v], k) {
					usedBy[v] = append(usedBy[v], k)
				}
			}
		}
	}
	inURL := map[string]bool{}
	for _, v := range refs(d.URL) {
		inURL[v] = true
	}

	for _, k := range d.OptionalKeys {
		if vals, ok := carried[foldKey(k, headers)]; ok {
			if !anyRefs(vals) {
				add("MCP server %q: optional_keys lists %s, but every value written for it is literal, so nothing can leave it out; remove it from optional_keys.", d.Name, k)
			}
			continue
		}
		switch {
		case len(usedBy[k]) > 0:
			keys := append([]string(nil), usedBy[k]...)
			sort.Strings(keys)
			add("MCP server %q: optional_keys lists %s, which is a variable's name, not a key; list the key that carries ${%s} instead (%s).", d.Name, k, k, strings.Join(keys, ", "))
		case inURL[k]:
			add("MCP server %q: optional_keys lists %s, which only the url references; a url reference cannot be declared optional, since without the url there is nothing to connect to.", d.Name, k)
		default:
			add("MCP server %q: optional_keys lists %s, but that key appears nowhere the server takes values from (its own %s, or any unit's or seat's mcp_env block for it).", d.Name, k, mapWord(headers))
		}
	}

	if headers {
		// Header names ignore case, so two spellings in one map (or in a
		// unit's block and a member's) leave it undecided which value is
		// sent. A seat's spelling over the template's is not ambiguous:
		// the seat's layer wins whole.
		checkSpellings := func(m map[string]string, where string) {
			byFold := map[string][]string{}
			for _, k := range sortedKeys(m) {
				f := strings.ToLower(k)
				byFold[f] = append(byFold[f], k)
			}
			for _, f := range slices.Sorted(maps.Keys(byFold)) {
				if ks := byFold[f]; len(ks) > 1 {
					add("MCP server %q: header %s is written more than once in %s (%s); header names ignore case, so nothing says which would be sent — keep one spelling.", d.Name, ks[0], where, strings.Join(ks, ", "))
				}
			}
		}
		checkSpellings(d.Headers, "its headers")
		for _, b := range blocks {
			checkSpellings(b.Unit, "a unit's mcp_env block")
			checkSpellings(b.Seat, "a seat's mcp_env block")
			for _, uk := range sortedKeys(b.Unit) {
				for _, sk := range sortedKeys(b.Seat) {
					if uk != sk && strings.EqualFold(uk, sk) {
						add("MCP server %q: a unit's mcp_env block sets header %s and one of its seats' blocks sets %s; header names ignore case, so these are the same header and nothing says which is sent — spell it the same way in both.", d.Name, uk, sk)
					}
				}
			}
		}
	}

	sort.Strings(out)
	return out
}

func mapWord(headers bool) string {
	if headers {
		return "headers"
	}
	return "env"
}

func anyRefs(vals []string) bool {
	for _, v := range vals {
		if len(refs(v)) > 0 {
			return true
		}
	}
	return false
}
