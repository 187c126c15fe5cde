package sanitize

import "strings"

// Kinds of key a key=value pair can have.
const (
	keyOther  = iota
	keySecret // password=, token=, api_key= ...: redact the value
	keyAuth   // Authorization: the value runs to the end of the line
)

// lowerASCII folds only ASCII letters. Unicode case folding would let
// characters such as the Kelvin sign stand in for a letter of a key name,
// and the byte windows compared here are not rune-aligned anyway.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasSuffixFold reports whether s ends with suffix (lower-case ASCII),
// ignoring ASCII case.
func hasSuffixFold(s, suffix string) bool {
	if len(s) < len(suffix) {
		return false
	}
	s = s[len(s)-len(suffix):]
	for i := range len(suffix) {
		if lowerASCII(s[i]) != suffix[i] {
			return false
		}
	}
	return true
}

// keyKind classifies the key that text ends with. Only the end of the key
// matters, so DB_PASSWORD, client_secret, GITHUB_TOKEN and x-api-key are all
// caught. It switches on the last letter first because this runs for every
// ':' and '=' in the text, and most keys are ruled out by that alone.
func keyKind(text string) int {
	if text == "" {
		return keyOther
	}
	switch lowerASCII(text[len(text)-1]) {
	case 'd':
		if hasSuffixFold(text, "password") || hasSuffixFold(text, "passwd") {
			return keySecret
		}
	case 'e':
		if hasSuffixFold(text, "passphrase") {
			return keySecret
		}
	case 't':
		if hasSuffixFold(text, "secret") {
			return keySecret
		}
	case 'n':
		if hasSuffixFold(text, "token") {
			return keySecret
		}
		if hasSuffixFold(text, "authorization") {
			return keyAuth
		}
	case 'y':
		if !hasSuffixFold(text, "key") {
			break
		}
		rest := text[:len(text)-3]
		if c := at(rest, len(rest)-1); c == '_' || c == '-' {
			rest = rest[:len(rest)-1]
		}
		// api_key, apikey, x-api-key, secret_key, aws_secret_access_key.
		if hasSuffixFold(rest, "api") || hasSuffixFold(rest, "access") || hasSuffixFold(rest, "secret") {
			return keySecret
		}
	}
	return keyOther
}

// mayEndKey is keyValue's fast reject for the ':' or '=' at s[i]: the text
// before it, past blanks and quotes, must end with a secret key name. Most
// ':' and '=' in JSON, logs and code fail this within a few byte compares.
// It must accept whatever keyValue accepts: keyValue steps back over ":",
// up to maxGap blanks, a quote and a backslash, all of which this skips
// too, and a key name ends in a letter, which this stops at.
func mayEndKey(s string, i int) bool {
	j := i
	for j > 0 && i-j < maxGap+3 && (isBlank(s[j-1]) || s[j-1] == ':' || s[j-1] == '"' || s[j-1] == '\'' || s[j-1] == '\\') {
		j--
	}
	return keyKind(s[:j]) != keyOther
}

func isKeyChar(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

// Terminator sets: the bytes that end a value of each form.
const (
	endUnquoted = iota // whitespace, quotes, and separators of URLs, JSON, shell, lists
	endDQ              // inside "...": the quote, an escape, or a line end
	endSQ              // inside '...'
	endLine            // a header value: the line end
	endLineDQ          // a header inside a "..." string: line end or the quote
	endLineSQ          // a header inside a '...' string
	numEndSets
)

var endSets = func() (t [numEndSets][256]bool) {
	for c := range 256 {
		t[endUnquoted][c] = c <= ' ' || strings.IndexByte("\"'\\&,;)]}<>", byte(c)) >= 0
	}
	for _, set := range []int{endDQ, endSQ, endLine, endLineDQ, endLineSQ} {
		t[set]['\n'], t[set]['\r'] = true, true
	}
	t[endDQ]['"'], t[endDQ]['\\'] = true, true
	t[endSQ]['\''], t[endSQ]['\\'] = true, true
	t[endLineDQ]['"'] = true
	t[endLineSQ]['\''] = true
	return t
}()

// nextEnd returns the index of the first byte of the given terminator set
// at or after v, or len(s), and the index just past the last non-blank
// byte before it (v if there is none). Successive calls from one scan
// come with v growing, and a cached answer still holds for any v up to
// it; answering from the cache is what keeps many pairs that share one
// long value from costing quadratic time.
func (sc *shapeScan) nextEnd(s string, set, v int) (end, trimmed int) {
	c := &sc.ends[set]
	if !c.valid || v < c.from || v > c.at {
		tab := &endSets[set]
		e, t := v, v
		for e < len(s) && !tab[s[e]] {
			if !isBlank(s[e]) {
				t = e + 1
			}
			e++
		}
		c.valid, c.from, c.at, c.trim = true, v, e, t
	}
	return c.at, max(v, c.trim)
}

// maxGap bounds how many blanks and quotes may separate a key from its ':'
// or '='. Looking back without a bound would make text of nothing but
// quotes cost quadratic time.
const maxGap = 64

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// keyValue handles a ':' or '=' at s[i]. If the key before it names a
// secret, it returns the span of the value after it, leaving the key and
// any quotes in place so the text still says what was there.
//
// Recognised forms include password=x, token: x, "api_key": "x", secret := "x",
// 'password' => 'x', \"token\":\"x\" (JSON inside a JSON string) and header
// lines such as Authorization: Basic x, where the scheme word is kept.
func (sc *shapeScan) keyValue(s string, i int) (span, bool) {
	keyEnd, v := i, i+1
	if s[i] == ':' {
		if at(s, i+1) == '=' {
			return span{}, false // ":=" is handled at its '='
		}
	} else {
		switch at(s, i+1) {
		case '=':
			return span{}, false // comparison
		case '>':
			v++ // "=>"
		}
		switch at(s, i-1) {
		case ':':
			keyEnd-- // ":="
		case '=', '!', '<', '>':
			return span{}, false // comparison
		}
	}
	for keyEnd > 0 && i-keyEnd < maxGap && isBlank(s[keyEnd-1]) {
		keyEnd--
	}
	keyQuoted := false
	if c := at(s, keyEnd-1); c == '"' || c == '\'' {
		keyQuoted = true
		keyEnd--
		if at(s, keyEnd-1) == '\\' {
			keyEnd--
		}
	}
	kind := keyKind(s[:keyEnd])
	if kind == keyOther {
		return span{}, false
	}
	// A bare ':' glued to a word on both sides is a name, not a key and its
	// value: "token:ci" is an operator login, "secret:v2" a label. A key
	// written that way has a blank or a quote around its ':'.
	if s[i] == ':' && !keyQuoted && keyEnd == i {
		if c := at(s, i+1); c != ' ' && c != '\t' && c != '"' && c != '\'' && c != '\\' {
			return span{}, false
		}
	}

	for v < len(s) && isBlank(s[v]) {
		v++
	}
	var quote byte
	switch c := at(s, v); {
	case c == '"' || c == '\'':
		quote = c
		v++
	case c == '\\' && at(s, v+1) == '"':
		quote = '"'
		v += 2
	}
	var e int
	switch {
	case quote == '"':
		// Stops at a backslash too: past an escape the value can no
		// longer be told from what follows it.
		e, _ = sc.nextEnd(s, endDQ, v)
	case quote == '\'':
		e, _ = sc.nextEnd(s, endSQ, v)
	case kind == keyAuth:
		// A header value runs to the end of its line, unless the whole
		// header sits in a quoted string (curl -H "Authorization: ...").
		set := endLine
		if !keyQuoted {
			k := keyEnd
			for k > 0 && keyEnd-k < 128 && isKeyChar(s[k-1]) {
				k--
			}
			switch at(s, k-1) {
			case '"':
				set = endLineDQ
			case '\'':
				set = endLineSQ
			}
		}
		_, e = sc.nextEnd(s, set, v)
	default:
		e, _ = sc.nextEnd(s, endUnquoted, v)
	}
	val := s[v:e]
	// An earlier redaction is not a value to redact again; the marker's
	// own ']' ends an unquoted value, so look past e.
	if val == "" || strings.HasPrefix(s[v:], Redacted) {
		return span{}, false
	}
	if quote == 0 && (val == "null" || val == "true" || val == "false") {
		return span{}, false // a JSON literal, not a credential
	}
	if kind == keyAuth {
		// Keep the scheme ("Bearer", "Basic", "token"): it is useful to
		// the reader and is no secret.
		k := 0
		for k < len(val) && isKeyChar(val[k]) {
			k++
		}
		if k > 0 && k < len(val) && isBlank(val[k]) {
			for k < len(val) && isBlank(val[k]) {
				k++
			}
			if strings.HasPrefix(val[k:], Redacted) {
				return span{}, false
			}
			v += k
		}
	}
	return span{v, e}, true
}
