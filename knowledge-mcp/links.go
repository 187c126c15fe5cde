package knowledge

import (
	"regexp"
	"slices"
)

// linkRE matches a link to another page written the one way a body links
// a page: [its title](#/knowledge/pages/<page id>).
var linkRE = regexp.MustCompile(`\[[^\]\n]*\]\(#/knowledge/pages/(pg_[0-9a-f]+)\)`)

// linksIn lists the ids of the pages a body links to, each once, in the
// order they first appear. A link to a page that does not exist is kept:
// it names a page somebody may write, and reading it says so.
func linksIn(body string) []string {
	var out []string
	for _, m := range linkRE.FindAllStringSubmatch(body, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}
