// Package toolscan reads a third-party tool's description for what a
// person approving it should look at twice: characters nobody sees,
// sentences addressed to the model rather than describing the tool,
// references to credentials and files the tool has no business with, and a
// description far longer than its server's others (issue 28).
//
// It flags; it never decides. A flag is a kind, a byte span of the text and
// a reason, shown beside the text in the approval diff and in the
// server_catalogue_changed event; whether the tool is offered is a
// person's decision. The rules are one table (rules), so a new pattern is
// one row and one line of testdata/scan.txt.
//
// Scan is a pure function of its arguments and safe for concurrent use.
package toolscan

import (
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind names what a flag found. Its string is stable: the screen and the
// operator tools show it, and scripts may act on it.
type Kind string

// The kinds of flag.
const (
	// Invisible: a character that renders as nothing (zero-width,
	// word joiner, soft hyphen, tag characters, supplementary variation
	// selectors): text a person reviewing the description cannot see
	// and a model still reads.
	Invisible Kind = "invisible_unicode"
	// Bidi: a bidirectional control, which makes text display in another
	// order than a model reads it.
	Bidi Kind = "bidi_unicode"
	// ToModel: a sentence addressed to the model that reads the
	// description ("ignore previous instructions", "do not tell the
	// user", an <IMPORTANT> block), not a description of the tool.
	ToModel Kind = "addressed_to_model"
	// Credential: a reference to a credential or a private file (~/.ssh,
	// id_rsa, .env, a token) that the tool's own name does not make its
	// business.
	Credential Kind = "credential_reference"
	// Long: a description much longer than the other tools' of the same
	// server, where instructions hide best.
	Long Kind = "long_description"
)

// Flag is one finding: Text[Start:End] of the scanned text is what it is
// about.
type Flag struct {
	Kind Kind `json:"kind"`
	// Field is where the scanned text is: empty for the tool's
	// description, else the JSON pointer of a description in its input
	// schema ("/properties/city/description"), which a model reads as
	// much as the tool's own.
	Field string `json:"field,omitempty"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	Text  string `json:"text"`
	Why   string `json:"why"`
}

// Tool is what Scan reads of a tool: its name (what its purpose is read
// from), its description, and the descriptions in its input schema.
type Tool struct {
	Name        string
	Description string
	Params      []Param
}

// Param is one description in a tool's input schema, by its JSON pointer.
type Param struct {
	Field, Text string
}

// rule is one row of the table: a kind, why it matters, and where it
// matches. purpose, if set, exempts a tool whose own name contains one of
// its words: a reference to tokens is a tool's purpose when it is called
// rotate_token.
type rule struct {
	kind    Kind
	why     string
	match   func(s string) [][2]int
	purpose []string
}

func phrase(pattern string) func(string) [][2]int {
	re := regexp.MustCompile(`(?i)` + pattern)
	return func(s string) [][2]int {
		var out [][2]int
		for _, m := range re.FindAllStringIndex(s, -1) {
			out = append(out, [2]int{m[0], m[1]})
		}
		return out
	}
}

// runs matches maximal runs of the runes in set.
func runs(set func(rune) bool) func(string) [][2]int {
	return func(s string) [][2]int {
		var out [][2]int
		start := -1
		for i, r := range s {
			switch {
			case set(r) && start < 0:
				start = i
			case !set(r) && start >= 0:
				out = append(out, [2]int{start, i})
				start = -1
			}
		}
		if start >= 0 {
			out = append(out, [2]int{start, len(s)})
		}
		return out
	}
}

func invisible(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x180E, r == 0xFEFF:
		return true
	case r >= 0x200B && r <= 0x200D, r >= 0x2060 && r <= 0x2064:
		return true
	case r >= 0xE0000 && r <= 0xE007F: // tag characters: ASCII spelled invisibly
		return true
	case r >= 0xE0100 && r <= 0xE01EF: // supplementary variation selectors, used to smuggle bytes
		return true
	}
	return false
}

func bidi(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// rules is the table. Phrases match case-insensitively; each is written
// narrowly enough that an ordinary description does not trip it
// (testdata/scan.txt holds a negative row for each).
var rules = []rule{
	{kind: Invisible, match: runs(invisible),
		why: "characters that display as nothing: a reviewer cannot see what they carry, a model reads it"},
	{kind: Bidi, match: runs(bidi),
		why: "bidirectional controls: the text displays in another order than a model reads it"},
	{kind: ToModel, match: phrase(`\b(ignore|disregard|forget)\s+(all\s+|any\s+)?(the\s+)?(previous|prior|above|earlier|other)\s+(instructions|prompts?|rules|messages)`),
		why: "tells the model to drop what it was told"},
	{kind: ToModel, match: phrase(`\b(do\s+not|don'?t|never)\s+(tell|inform|mention|reveal|show|alert|notify)\b[^.\n]{0,40}?\b(the\s+)?user`),
		why: "tells the model to keep something from the user"},
	{kind: ToModel, match: phrase(`</?\s*(important|system|instructions?|secret|hidden|admin)\s*>`),
		why: "a tag addressed to the model, as a prompt injection writes it"},
	{kind: ToModel, match: phrase(`\b(before|prior\s+to)\s+(using|calling|running)\s+(this|any)\s+tool\s*,?\s*(you\s+must\s+|always\s+|first\s+)?(read|call|send|pass|include|fetch|open|run|list|upload)\b`),
		why: "a step the model is told to take before any use of the tool"},
	{kind: ToModel, match: phrase(`\byou\s+(are|must)\s+now\b|\bnew\s+instructions\s*:`),
		why: "redefines what the model is or must do"},
	{kind: Credential, match: phrase(`~/\.ssh\b|\.ssh/|\bid_(rsa|dsa|ecdsa|ed25519)\b`),
		why: "names SSH keys", purpose: []string{"ssh"}},
	{kind: Credential, match: phrase(`(^|[\s"'` + "`" + `(/~])\.env\b`),
		why: "names an environment file, where credentials are kept", purpose: []string{"env"}},
	{kind: Credential, match: phrase(`\.aws/credentials|\.netrc\b|\.npmrc\b|\.pgpass\b|\.git-credentials\b|/etc/(passwd|shadow)\b|\.kube/config\b|\.docker/config\.json`),
		why: "names a file where credentials are kept", purpose: []string{"credential", "config"}},
	{kind: Credential, match: phrase(`\b(api[_\s-]?keys?|access[_\s-]?tokens?|secret[_\s-]?keys?|bearer\s+tokens?|auth(entication)?[_\s-]?tokens?|private\s+keys?|passwords?|session\s+cookies?)\b`),
		why: "names a credential", purpose: []string{"key", "token", "secret", "password", "auth", "login", "credential", "cookie"}},
}

// Long descriptions: longer than longFactor times the median of the
// server's other descriptions, and than longFloor bytes, with at least
// longPeers others to compare with. A server of one or two tools has no
// "usual" length to stand out from.
const (
	longFactor = 4
	longFloor  = 600
	longPeers  = 2
)

// Scan flags t's description, then each of its parameters' descriptions
// by the same rules (the length rule reads the description alone). others
// are the descriptions of the server's other tools, for the length rule.
// Flags come by field (the description first), then in order of their
// start, then kind.
func Scan(t Tool, others []string) []Flag {
	name := strings.ToLower(t.Name)
	out := scanText(name, "", t.Description)
	if f, ok := long(t.Description, others); ok {
		out = append(out, f)
	}
	for _, p := range t.Params {
		out = append(out, scanText(name, p.Field, p.Text)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.Kind < b.Kind
	})
	return out
}

// scanText applies every rule the tool's name does not exempt to one text.
func scanText(name, field, s string) []Flag {
	var out []Flag
	for _, r := range rules {
		if exempt(name, r.purpose) {
			continue
		}
		for _, m := range r.match(s) {
			out = append(out, Flag{Kind: r.kind, Field: field, Start: m[0], End: m[1], Text: Show(s[m[0]:m[1]]), Why: r.why})
		}
	}
	return out
}

// Params lists every description in an input schema, at any depth
// (properties, items, definitions), by JSON pointer, in pointer order. A
// schema that is not JSON has none: the hub decoded it once already.
func Params(schema []byte) []Param {
	var v any
	if len(schema) == 0 || json.Unmarshal(schema, &v) != nil {
		return nil
	}
	var out []Param
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				at := ptr + "/" + pointerEscaper.Replace(k)
				if s, ok := c.(string); ok && k == "description" {
					out = append(out, Param{Field: at, Text: s})
					continue
				}
				walk(at, c)
			}
		case []any:
			for i, c := range v {
				walk(ptr+"/"+strconv.Itoa(i), c)
			}
		}
	}
	walk("", v)
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// pointerEscaper writes a key as a JSON pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func exempt(name string, purpose []string) bool {
	for _, w := range purpose {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func long(s string, others []string) (Flag, bool) {
	if len(others) < longPeers || len(s) <= longFloor {
		return Flag{}, false
	}
	lens := make([]int, len(others))
	for i, o := range others {
		lens[i] = len(o)
	}
	sort.Ints(lens)
	median := lens[len(lens)/2]
	if len(lens)%2 == 0 {
		median = (lens[len(lens)/2-1] + lens[len(lens)/2]) / 2
	}
	if len(s) <= longFactor*median {
		return Flag{}, false
	}
	return Flag{Kind: Long, Start: 0, End: len(s), Text: "",
		Why: "much longer than this server's other descriptions, where instructions hide best"}, true
}

// Show writes text for a person: every invisible or bidirectional
// character as its code point (U+200B), so a flag's text shows what a
// rendering of it would hide.
func Show(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError {
			b.WriteString(s[i : i+1])
			continue
		}
		if invisible(r) || bidi(r) {
			b.WriteString(code(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func code(r rune) string {
	const hex = "0123456789ABCDEF"
	digits := []byte{}
	for v := r; v > 0 || len(digits) < 4; v >>= 4 {
		digits = append([]byte{hex[v&0xF]}, digits...)
	}
	return "U+" + string(digits)
}
