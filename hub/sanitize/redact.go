package sanitize

import (
	"regexp"
	"slices"
	"strings"
)

// span is a byte range [start, end) of text to replace with Redacted.
type span struct{ start, end int }

// Credential shapes, each anchored at the position where the scan found a
// candidate, so a match costs only as much as the token it reads. Compiled
// once: they are used on every result the hub returns.
var (
	// sk-... API keys (OpenAI, Anthropic and others).
	reSKKey = regexp.MustCompile(`^sk-[A-Za-z0-9_-]{20,}`)
	// GitHub personal, OAuth, user-to-server, server-to-server and refresh
	// tokens, and fine-grained personal access tokens.
	reGitHub = regexp.MustCompile(`^(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`)
	// Slack bot, user, app-level and refresh tokens.
	reSlack = regexp.MustCompile(`^(?:xox[bpar]|xapp)-[A-Za-z0-9-]{10,}`)
	// AWS access key ids (long-term AKIA, temporary ASIA).
	reAWS = regexp.MustCompile(`^(?:AKIA|ASIA)[A-Z0-9]{16}`)
	// JWTs: a JSON header (base64url of `{"` is "eyJ"), payload, signature.
	reJWT = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
	// The token after a Bearer scheme word (RFC 6750 b64token). At least
	// eight characters, so prose such as "bearer bonds" stays readable.
	reBearerToken = regexp.MustCompile(`^[ \t]+([A-Za-z0-9._~+/-]{8,}=*)`)
	// PEM private key armour lines (PKCS#1, PKCS#8, OpenSSH, EC, PGP ...).
	rePEMBegin = regexp.MustCompile(`^-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)
	rePEMEnd   = regexp.MustCompile(`^-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)
)

// Each credential shape contains a trigger byte at a fixed place. The scan
// finds trigger bytes with strings.IndexByte, which skips clean text at
// vector speed, and inspects only their surroundings:
//
//	':' '='  key: value and key=value pairs, Authorization headers
//	'-'      sk- keys, Slack tokens, PEM armour
//	'_'      gh?_ and github_pat_ tokens
//	'J'      the J of the "eyJ" a JWT starts with
//	'K' 'S'  the second letter of AKIA / ASIA
//	'b' 'B'  bearer, Bearer, BEARER
const triggers = ":=-_JKSbB"

// chunkSize is how much text is searched for every trigger byte and secret
// before moving on. One pass per trigger over a whole 5 MiB text would
// stream it from memory a dozen times; a chunk stays in cache for all of
// them.
const chunkSize = 16 << 10

// isTrigger marks the trigger bytes.
var isTrigger = func() (t [256]bool) {
	for i := range len(triggers) {
		t[triggers[i]] = true
	}
	return t
}()

// redact replaces configured secrets and credential shapes in s. It reports
// whether anything was replaced; if not, s is returned as is.
func redact(s string, set *secretSet) (string, bool) {
	if len(s) <= shortText && quiet(s, set) {
		return s, false
	}
	return scan(s, set)
}

// scan is redact's search, chunk by chunk, trigger by trigger.
func scan(s string, set *secretSet) (string, bool) {
	var buf [8]span
	spans := buf[:0]
	var scans [len(triggers)]shapeScan
	for lo := 0; lo < len(s); lo += chunkSize {
		hi := min(lo+chunkSize, len(s))
		spans = findSecrets(s, lo, hi, set, spans)
		for t := range len(triggers) {
			c, sc := triggers[t], &scans[t]
			for from := lo; ; {
				i := strings.IndexByte(s[from:hi], c)
				if i < 0 {
					break
				}
				i += from
				from = i + 1
				if sp, ok := sc.detect(c, s, i); ok {
					spans = addSpan(spans, sp)
				}
			}
		}
	}
	if len(spans) == 0 {
		return s, false
	}
	return replaceSpans(s, spans), true
}

// shortText bounds the texts first looked at whole, for anything a
// redaction could start from, before any search per trigger. Most strings
// of a structured result (keys, ids, titles, times) have nothing, though
// nearly all hold a trigger byte (the dashes and colons of a date) and
// many hold a configured value's anchor byte (a digit, often), and the
// search's set-up costs more than such a string's whole look.
const shortText = 256

// quiet reports whether s holds nothing to redact, found more cheaply
// than by scan on a short text: no configured value, and no trigger byte
// that passes its candidate test.
func quiet(s string, set *secretSet) bool {
	var none [1]span
	if len(findSecrets(s, 0, len(s), set, none[:0])) > 0 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; isTrigger[c] && candidate(c, s, i) {
			return false
		}
	}
	return true
}

// findSecrets appends the spans of every configured value that starts in
// s[lo:hi]. All occurrences count, overlapping ones included: stepping past
// a whole match could leave the tail of an overlapping one behind.
func findSecrets(s string, lo, hi int, set *secretSet, spans []span) []span {
	for gi := range set.anchors {
		g := &set.anchors[gi]
		end := min(hi+g.maxOff, len(s))
		for from := lo + g.minOff; from < end; {
			j := strings.IndexByte(s[from:end], g.b)
			if j < 0 {
				break
			}
			p := from + j
			from = p + 1
			for _, a := range g.values {
				if i := p - a.off; i >= lo && i < hi && i+len(a.v) <= len(s) && s[i:i+len(a.v)] == a.v {
					spans = addSpan(spans, span{i, i + len(a.v)})
				}
			}
		}
	}
	for _, v := range set.long {
		end := min(hi+len(v)-1, len(s))
		for from := lo; from < end; {
			i := strings.Index(s[from:end], v)
			if i < 0 {
				break
			}
			i += from
			spans = addSpan(spans, span{i, i + len(v)})
			from = i + 1
		}
	}
	return spans
}

// addSpan appends sp, or widens the last span if sp starts inside it. Each
// search reports positions in increasing order, so a run of overlapping
// matches (a repetitive secret in repetitive text matches at every byte)
// takes one span, not one per byte.
func addSpan(spans []span, sp span) []span {
	if n := len(spans); n > 0 && spans[n-1].start <= sp.start && sp.start < spans[n-1].end {
		spans[n-1].end = max(spans[n-1].end, sp.end)
		return spans
	}
	return append(spans, sp)
}

// replaceSpans replaces each union of overlapping spans with one Redacted.
func replaceSpans(s string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(s) + len(spans)*len(Redacted))
	last := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		b.WriteString(s[last:cur.start])
		b.WriteString(Redacted)
		last = cur.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// shapeScan is what the scan for one trigger byte remembers. Its caches
// keep the running time linear in the length of the text whatever the text
// holds: each trigger asks for "the next X at or after here" with "here"
// only growing, so no stretch of text is searched twice.
type shapeScan struct {
	// ends caches nextEnd per terminator set.
	ends [numEndSets]struct {
		valid          bool
		from, at, trim int
	}
	// The cached answer of nextPEMEnd.
	pemSearched     bool
	pemFrom, pemEnd int
}

// candidate is the first test of a trigger byte c at s[i]: a cheap look at
// its neighbours that rules out nearly every ordinary occurrence (the dash
// of a date, the colon of a time) before detect does any real work.
func candidate(c byte, s string, i int) bool {
	switch c {
	case ':', '=':
		return mayEndKey(s, i)
	case '-':
		return i > 0 && strings.IndexByte("kbpar-", s[i-1]) >= 0 || at(s, i+1) == '-'
	case '_':
		return i > 0 && strings.IndexByte("pousrb", s[i-1]) >= 0
	case 'J':
		return i >= 2 && s[i-1] == 'y' && s[i-2] == 'e' && !isB64URL(at(s, i-3))
	case 'K', 'S':
		return at(s, i-1) == 'A' && at(s, i+1) == 'I'
	case 'b', 'B':
		c := at(s, i+1)
		return c == 'e' || c == 'E'
	}
	return false
}

// detect finds the credential a trigger byte c at s[i] belongs to, if any.
func (sc *shapeScan) detect(c byte, s string, i int) (span, bool) {
	if !candidate(c, s, i) {
		return span{}, false
	}
	switch c {
	case ':', '=':
		return sc.keyValue(s, i)
	case '-':
		return sc.dashToken(s, i)
	case '_':
		return gitHubToken(s, i)
	case 'J':
		return match(reJWT, s, i-2)
	case 'K', 'S':
		return awsKeyID(s, i)
	case 'b', 'B':
		return bearerToken(s, i)
	}
	return span{}, false
}

// at returns s[i], or 0 outside s, so boundary checks need no length tests.
func at(s string, i int) byte {
	if i < 0 || i >= len(s) {
		return 0
	}
	return s[i]
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isB64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

// match runs an anchored regexp at s[from:] and returns the match as a span.
func match(re *regexp.Regexp, s string, from int) (span, bool) {
	loc := re.FindStringIndex(s[from:])
	if loc == nil {
		return span{}, false
	}
	return span{from + loc[0], from + loc[1]}, true
}

// dashToken handles a '-' at s[i]: sk- keys, Slack tokens, PEM private keys.
// Each token must start where a run of its own characters starts; besides
// avoiding matches inside longer words, that keeps "xoxb-xoxb-..." from
// being matched once per dash, which would take quadratic time.
func (sc *shapeScan) dashToken(s string, i int) (span, bool) {
	switch {
	case i >= 2 && s[i-2:i] == "sk" && !isB64URL(at(s, i-3)):
		return match(reSKKey, s, i-2)
	case i >= 4 && !isB64URL(at(s, i-5)) && (s[i-4:i] == "xoxb" || s[i-4:i] == "xoxp" ||
		s[i-4:i] == "xoxa" || s[i-4:i] == "xoxr" || s[i-4:i] == "xapp"):
		return match(reSlack, s, i-4)
	case strings.HasPrefix(s[i:], "-----BEGIN ") && at(s, i-1) != '-':
		return sc.pemBlock(s, i)
	}
	return span{}, false
}

// gitHubToken handles a '_' at s[i]: gh?_ tokens and github_pat_.
func gitHubToken(s string, i int) (span, bool) {
	if i >= 3 && s[i-3] == 'g' && s[i-2] == 'h' && !isB64URL(at(s, i-4)) {
		switch s[i-1] {
		case 'p', 'o', 'u', 's', 'r':
			return match(reGitHub, s, i-3)
		}
	}
	if i >= 6 && s[i-6:i] == "github" && strings.HasPrefix(s[i:], "_pat_") && !isB64URL(at(s, i-7)) {
		return match(reGitHub, s, i-6)
	}
	return span{}, false
}

// awsKeyID handles a 'K' or 'S' at s[i], the second letter of AKIA/ASIA.
func awsKeyID(s string, i int) (span, bool) {
	if at(s, i-1) != 'A' || at(s, i+1) != 'I' || at(s, i+2) != 'A' || isAlnum(at(s, i-2)) {
		return span{}, false
	}
	sp, ok := match(reAWS, s, i-1)
	// An id is exactly 20 characters; a longer run is something else.
	if !ok || isAlnum(at(s, sp.end)) {
		return span{}, false
	}
	return sp, true
}

// bearerToken handles a 'b' or 'B' at s[i] that may start the word
// "bearer" (any case: HTTP auth schemes are case-insensitive) and redacts
// the token after it, keeping the word.
func bearerToken(s string, i int) (span, bool) {
	if len(s)-i < 8 || !hasSuffixFold(s[i:i+6], "bearer") || isAlnum(at(s, i-1)) || !isBlank(s[i+6]) {
		return span{}, false
	}
	loc := reBearerToken.FindStringSubmatchIndex(s[i+6:])
	if loc == nil {
		return span{}, false
	}
	return span{i + 6 + loc[2], i + 6 + loc[3]}, true
}

// pemBlock redacts a PEM private key whose BEGIN line starts at s[i]: the
// whole block, armour included, because every line of it is key material
// or says which key it was. A block cut off before its END line is
// redacted as far as its body runs.
func (sc *shapeScan) pemBlock(s string, i int) (span, bool) {
	begin, ok := match(rePEMBegin, s, i)
	if !ok {
		return span{}, false
	}
	if j := sc.nextPEMEnd(s, begin.end); j >= 0 {
		end, _ := match(rePEMEnd, s, j)
		return span{i, end.end}, true
	}
	// No END line: take the lines that follow while they look like PEM
	// headers, base64 or blank. Line breaks may be real or JSON-escaped.
	end := begin.end
	for j := begin.end; j < len(s); {
		k := j
		for k < len(s) && s[k] != '\n' && s[k] != '\r' && !(s[k] == '\\' && (at(s, k+1) == 'n' || at(s, k+1) == 'r')) {
			k++
		}
		line := strings.TrimRight(s[j:k], " \t")
		if !isPEMBodyLine(line) {
			break
		}
		if strings.TrimSpace(line) != "" {
			end = j + len(line)
		}
		if k < len(s) && s[k] == '\\' {
			k++
		}
		j = k + 1
	}
	return span{i, end}, true
}

// nextPEMEnd returns the index of the first valid END armour line at or
// after from, or -1. Answers are cached because calls come in increasing
// order of from: without that, text full of BEGIN lines and no END would
// be searched to its end once per BEGIN.
func (sc *shapeScan) nextPEMEnd(s string, from int) int {
	if sc.pemSearched && from >= sc.pemFrom && (sc.pemEnd < 0 || sc.pemEnd >= from) {
		return sc.pemEnd
	}
	sc.pemSearched, sc.pemFrom, sc.pemEnd = true, from, -1
	for j := from; ; {
		k := strings.Index(s[j:], "-----END ")
		if k < 0 {
			return -1
		}
		k += j
		if rePEMEnd.MatchString(s[k:]) {
			sc.pemEnd = k
			return k
		}
		j = k + 1
	}
}

// isPEMBodyLine reports whether line can be part of a PEM block's body:
// blank, base64, or an RFC 1421 header such as "Proc-Type: 4,ENCRYPTED".
func isPEMBodyLine(line string) bool {
	line = strings.TrimSpace(line)
	if k := strings.Index(line, ": "); k > 0 {
		for _, c := range []byte(line[:k]) {
			if !isAlnum(c) && c != '-' {
				return false
			}
		}
		return true
	}
	for _, c := range []byte(line) {
		if !isAlnum(c) && c != '+' && c != '/' && c != '=' {
			return false
		}
	}
	return true
}
