package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// yamlLineRe reads the line a YAML syntax error names ("yaml: line 3: ...").
var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): `)

// unquotedRefInFlowRe is a ${VAR} written bare as a value inside a {…}
// flow mapping, where YAML reads its braces as the mapping's own.
var unquotedRefInFlowRe = regexp.MustCompile(`\{[^#]*:\s*\$\{`)

// syntaxError says what is wrong with a document that is not YAML. The
// parser's own words are kept, and for the two mistakes people make most
// in a company file it names the place: a tab in indentation (YAML
// indents with spaces only, and its parser says only that a character
// "cannot start any token") and a bare ${VAR} in a {…} mapping. The
// parser names the line its context began on, not the offending one, so
// the place is looked for from there on.
func syntaxError(data []byte, err error) string {
	msg := "the file is not valid YAML: " + err.Error()
	from := 1
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		from, _ = strconv.Atoi(m[1])
	}
	lines := strings.Split(string(data), "\n")
	switch e := err.Error(); {
	case strings.Contains(e, "cannot start any token") || strings.Contains(e, "tab character"):
		if line, col, ok := indentTab(lines, from); ok {
			return fmt.Sprintf("%s. Line %d, column %d is a tab: YAML indents with spaces only; replace the tab with spaces", msg, line, col)
		}
	case strings.Contains(e, "did not find expected ',' or '}'"):
		for i := max(from, 1) - 1; i < len(lines); i++ {
			if unquotedRefInFlowRe.MatchString(lines[i]) {
				return fmt.Sprintf("%s. Line %d has a ${VAR} inside a {…} mapping without quotes: write it \"${VAR}\", since YAML reads the braces of a bare ${VAR} there as the mapping's own",
					msg, i+1)
			}
		}
	}
	return msg
}

// indentTab finds the first tab in the indentation of a line (the spaces,
// tabs and sequence dashes that open it), from line from on, then from
// the top; 1-based line and column.
func indentTab(lines []string, from int) (line, col int, ok bool) {
	find := func(lo, hi int) (int, int, bool) {
		for i := lo; i < hi && i < len(lines); i++ {
			lead := len(lines[i]) - len(strings.TrimLeft(lines[i], " \t-"))
			if j := strings.IndexByte(lines[i][:lead], '\t'); j >= 0 {
				return i + 1, j + 1, true
			}
		}
		return 0, 0, false
	}
	if line, col, ok = find(max(from, 1)-1, len(lines)); ok {
		return line, col, ok
	}
	return find(0, len(lines))
}
