package toolscan

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mtibben/confusables"
)

// Tool names (issue 36): a name is what a person approving a tool reads
// first and what a model picks a tool by, so a name that renders like
// another offered name, or holds characters nobody sees, passes an
// approval as the tool it imitates. Two rules:
//
//   - ValidName: the hub offers a third-party name only in the MCP
//     specification's recommended set, ASCII letters, digits, '_', '-'
//     and '.', 1 to 128 of them. lookup_colleagu\u0435 (a Cyrillic e),
//     echo\u200b and e\u202ecf are refused outright.
//   - Names: a name inside that set can still pass for another (1 for l,
//     rn for m, another case): Names flags a name whose Unicode TR39
//     skeleton, read without case, is another offered name's.
//
// The skeletons are github.com/mtibben/confusables' (TR39's
// confusables.txt); golang.org/x/text has no confusable data.

// MaxNameLen is the longest name the hub offers, as the MCP specification
// recommends.
const MaxNameLen = 128

// ConfusableName is the kind of a flag on a name that reads as another
// offered name.
const ConfusableName Kind = "confusable_name"

// NameField is the Field of a flag on the tool's name.
const NameField = "name"

// ValidName reports whether the hub offers a third-party tool under name,
// and if not, why, in words for the server's status and the log.
func ValidName(name string) (ok bool, why string) {
	switch n := len(name); {
	case n == 0:
		return false, "the name is empty"
	case n > MaxNameLen:
		return false, fmt.Sprintf("the name is %d bytes long, over the %d a tool name may have", n, MaxNameLen)
	}
	for _, r := range name {
		if !nameRune(r) {
			return false, fmt.Sprintf("the name holds %s, outside the letters A-Z and a-z, the digits, '_', '-' and '.' a tool name may use", ShowName(string(r)))
		}
	}
	return true, ""
}

func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
}

// Names flags name when it can pass for one of offered, the other names
// offered beside it: the same TR39 skeleton without regard to case. A
// name identical to one offered is a collision the catalogue refuses, not
// a look-alike, and is not flagged here.
func Names(name string, offered []string) []Flag {
	mine := skeletons(name)
	var out []Flag
	for _, o := range offered {
		if o == name || !alike(skeletons(o), mine) {
			continue
		}
		why := fmt.Sprintf("reads as %s, another tool offered beside it: a person or a model can take one for the other", ShowName(o))
		if strings.EqualFold(o, name) {
			why = fmt.Sprintf("differs from %s, another tool offered beside it, only in case: a person or a model can take one for the other", ShowName(o))
		}
		out = append(out, Flag{Kind: ConfusableName, Field: NameField, Start: 0, End: len(name), Text: ShowName(name), Why: why})
	}
	return out
}

// skeletons are the forms in which two names that a reader takes for one
// meet: TR39's skeleton of the name lower-cased (Lookup_Colleague and
// lookup_colleague, create_work_Item and create_work_item), and of its
// skeleton lower-cased (a capital I read as l, in Iist_pages).
func skeletons(s string) [2]string {
	return [2]string{confusables.Skeleton(strings.ToLower(s)), confusables.Skeleton(strings.ToLower(confusables.Skeleton(s)))}
}

func alike(a, b [2]string) bool {
	return a[0] == b[0] || a[0] == b[1] || a[1] == b[0] || a[1] == b[1]
}

// ShowName writes a name for a person: every character outside printable
// ASCII as its code point in angle brackets (lookup_colleagu<U+0435>), so
// a name that renders as another shows how it differs; bytes that are not
// UTF-8 as <0xNN>.
func ShowName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "<0x%02X>", s[i])
		case r > 0x20 && r < 0x7F && r != '<' && r != '>':
			b.WriteRune(r)
		default:
			b.WriteString("<" + code(r) + ">")
		}
		i += n
	}
	return b.String()
}
