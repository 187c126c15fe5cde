package launch

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How a configured launch is shown to an operator (GET /mcp-servers) or
// said in a log line: every ${VAR} reference as written, since it names
// where a value comes from and is no secret, and no literal text that could
// be one. A literal is shown only when it cannot carry a credential: text
// with no letter or digit in it (separators, a slash), optionally after an
// HTTP auth scheme word, so "Bearer ${TOKEN}" reads as written while
// "sk-live-${REST}" does not show its first characters. URLs keep their
// scheme, host and path; userinfo and query values are masked.

// authSchemes are the words that may open a header value shown as written.
var authSchemes = []string{"bearer", "basic", "token", "bot", "digest", "apikey"}

// MaskValue shows a configured value with its literal parts hidden.
func MaskValue(v string) string {
	segs := parse(v)
	if len(segs) == 1 && !segs[0].ref {
		return hidden(v)
	}
	var b strings.Builder
	for _, s := range segs {
		if s.ref {
			b.WriteString("${" + s.text + "}")
		} else {
			b.WriteString(maskLiteral(s.text))
		}
	}
	return b.String()
}

func hidden(s string) string {
	if n := utf8.RuneCountInString(s); n != 1 {
		return fmt.Sprintf("(literal, %d characters)", n)
	}
	return "(literal, 1 character)"
}

// maskLiteral shows a literal run beside references when it cannot carry
// a credential, and hides it otherwise.
func maskLiteral(s string) string {
	if s == "" {
		return s
	}
	rest := s
	for _, w := range authSchemes {
		if len(rest) > len(w) && strings.EqualFold(rest[:len(w)], w) && (rest[len(w)] == ' ' || rest[len(w)] == '\t') {
			rest = rest[len(w):]
			break
		}
	}
	if strings.IndexFunc(rest, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
		return s
	}
	return hidden(s)
}

// urlPattern finds URLs in free text: a scheme, "://", and what follows up
// to a space or a quote.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]*`)

// MaskURLs masks the userinfo and query values of every URL in s (an
// argument, a configured url, an error message that quotes one).
func MaskURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlPattern.ReplaceAllStringFunc(s, maskURL)
}

// maskURL masks one URL: user and password, each query value and the
// fragment go through MaskValue; scheme, host, port and path are shown.
// It splits by hand rather than with net/url, which refuses a ${VAR} in a
// host and would re-escape what it shows.
func maskURL(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, tail := rest[:authEnd], rest[authEnd:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		masked := MaskValue(user)
		if hasPass {
			masked += ":" + MaskValue(pass)
		}
		authority = masked + authority[at:]
	}
	fragment := ""
	if i := strings.IndexByte(tail, '#'); i >= 0 {
		tail, fragment = tail[:i], "#"+MaskValue(tail[i+1:])
	}
	if i := strings.IndexByte(tail, '?'); i >= 0 {
		params := strings.Split(tail[i+1:], "&")
		for j, p := range params {
			if k, v, ok := strings.Cut(p, "="); ok {
				params[j] = k + "=" + MaskValue(v)
			}
		}
		tail = tail[:i+1] + strings.Join(params, "&")
	}
	return scheme + "://" + authority + tail + fragment
}
