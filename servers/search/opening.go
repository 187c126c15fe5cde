package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// docText is what a document's vector is made from: its title, then its
// body.
func docText(d Doc) string {
	t, b := strings.TrimSpace(d.Title), strings.TrimSpace(d.Body)
	switch {
	case t == "":
		return b
	case b == "":
		return t
	}
	return t + "\n\n" + b
}

// opening is the part of text a document's vector is made from when the
// whole is past the model's bound: its opening, because the opening is
// what a search for the document is about. It is cut after a whole unit —
// a paragraph, else a sentence, else a word — taking the largest unit that
// keeps at least half of what fits, so a short first paragraph does not
// throw the rest away. Only the vector's input is cut; the document keeps
// its text.
func opening(text string, max int) string {
	if len(text) <= max {
		return text
	}
	if max <= 0 {
		return ""
	}
	head := text[:max]
	for !utf8.ValidString(head) && len(head) > 0 {
		head = head[:len(head)-1] // never split a character
	}
	half := max / 2
	if i := strings.LastIndex(head, "\n\n"); i >= half {
		return strings.TrimRightFunc(head[:i], unicode.IsSpace)
	}
	if i := lastSentenceEnd(head); i >= half {
		return head[:i]
	}
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i > 0 {
		return strings.TrimRightFunc(head[:i], unicode.IsSpace)
	}
	return head
}

// lastSentenceEnd is the end (after the punctuation) of the last sentence
// in s that is followed by a space, or -1.
func lastSentenceEnd(s string) int {
	for i := len(s) - 2; i > 0; i-- {
		switch s[i] {
		case '.', '!', '?':
			if s[i+1] == ' ' || s[i+1] == '\n' || s[i+1] == '\t' {
				return i + 1
			}
		}
	}
	return -1
}

// lead is the opening of a document's body shown for a hit no keyword
// matched (found by meaning): about snippetBytes, cut after a word, with a
// marker that more follows.
func lead(d Doc) string {
	text := strings.TrimSpace(d.Body)
	if text == "" {
		text = strings.TrimSpace(d.Title)
	}
	cut := opening(text, snippetBytes)
	if len(cut) < len(text) {
		return cut + " …"
	}
	return cut
}
