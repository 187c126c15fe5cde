package config

import (
	"os"
	"strings"
	"testing"
)

// Issue 40: the README's provider example did not parse, and nothing
// checked it. Every ```yaml block of the README is a company file of its
// own, read by the parser a hub reads its file with, and must have no
// problem: the rule is that a block is a whole document, never a
// fragment, so a person can copy any of them into a file and run it
// (fields a block is not about still need their required neighbours, a
// unit its name). The Quickstart's lines appended to the embedded company
// (`cat >> company.yaml <<'EOF'` in a ```sh block) are read appended to
// it, as the shell builds the file. A block that fails is named by the
// README line its body starts on.
func TestEveryReadmeYAMLBlockParses(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(string(b))
	if len(blocks) < 8 {
		t.Fatalf("found %d YAML blocks in the README; it holds more: the extraction is broken", len(blocks))
	}
	for _, bl := range blocks {
		doc := bl.body
		if bl.appended {
			doc = string(DefaultYAML()) + doc
		}
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("README.md:%d: the block does not parse as a company file:\n%v\n---\n%s", bl.line, err, bl.body)
		}
	}
}

// readmeBlock is one YAML document of the README.
type readmeBlock struct {
	line     int // 1-based line of its body's first line
	body     string
	appended bool // appended to the embedded company, as the Quickstart does
}

// readmeBlocks finds the ```yaml blocks (indented ones in a list item
// included) and the company lines a ```sh block appends with a heredoc.
func readmeBlocks(readme string) []readmeBlock {
	lines := strings.Split(readme, "\n")
	var out []readmeBlock
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if fence != "```yaml" && fence != "```sh" {
			continue
		}
		indent := strings.Repeat(" ", len(lines[i])-len(strings.TrimLeft(lines[i], " ")))
		start := i + 1
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if fence == "```yaml" {
			out = append(out, readmeBlock{line: start + 1, body: strings.Join(body, "\n") + "\n"})
			continue
		}
		for j := 0; j < len(body); j++ {
			if !strings.HasPrefix(body[j], "cat >> company.yaml <<'EOF'") {
				continue
			}
			first := j + 1
			var doc []string
			for j++; j < len(body) && body[j] != "EOF"; j++ {
				doc = append(doc, body[j])
			}
			out = append(out, readmeBlock{line: start + first + 1, body: strings.Join(doc, "\n") + "\n", appended: true})
		}
	}
	return out
}
