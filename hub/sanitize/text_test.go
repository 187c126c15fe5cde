package sanitize

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Fake credentials are assembled at run time, so that no literal token in
// this repository trips a secret scanner; none of them is real.
var (
	fakeGitHub    = "gh" + "p_" + strings.Repeat("A1b2", 9)
	fakeGitHubPAT = "github" + "_pat_" + "11ABCDEFG0" + strings.Repeat("x_Y9", 10)
	fakeSlack     = "xo" + "xb-" + "1234567890-0987654321-" + strings.Repeat("Ab", 12)
	fakeSlackApp  = "xa" + "pp-" + "1-A0123456789-" + strings.Repeat("9z", 10)
	fakeSK        = "s" + "k-" + strings.Repeat("aB3_", 8)
	fakeSKProj    = "s" + "k-proj-" + strings.Repeat("Qw9-", 10)
	fakeSKAnt     = "s" + "k-ant-api03-" + strings.Repeat("Zx7_", 12)
	fakeAKIA      = "AK" + "IA" + "IOSFODNN7EXAMPLE"
	fakeASIA      = "AS" + "IA" + "Z2X3C4V5B6N7M8Q9"
	fakeJWT       = "ey" + "JhbGciOiJIUzI1NiJ9" + ".ey" + "JzdWIiOiIxMjM0NTY3ODkwIn0" + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	fakeKeyBody   = "MIIEowIBAAKCAQEA" + strings.Repeat("q1W2e3R4t5Y6u7I8", 4) + "\n" + strings.Repeat("o9P0a1S2d3F4g5H6", 4)
)

// A long configured secret (over maxAnchored bytes, so it is searched
// whole) that starts and ends with the same text.
var (
	longEdge   = "edge-shared-by-both-ends-"
	longMiddle = strings.Repeat("middle-part-", 4)
)

func pem(kind, body string) string {
	return "-----BEGIN " + kind + "-----\n" + body + "\n-----END " + kind + "-----"
}

// textCase is one row of the data-driven Text tables.
type textCase struct {
	name string
	in   string
	want string
}

func runTextCases(t *testing.T, s *Sanitizer, cases []textCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Text(tc.in)
			if err != nil {
				t.Fatalf("Text(%q) error: %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			// OUT-1: sanitising is idempotent.
			again, err := s.Text(got)
			if err != nil || again != got {
				t.Errorf("Text is not idempotent on %q: %q, %v", got, again, err)
			}
		})
	}
}

// OUT-1: control characters are stripped, ANSI sequences as a whole, and
// all other Unicode is kept.
func TestTextStripsControlCharacters_OUT1(t *testing.T) {
	runTextCases(t, New(), []textCase{
		{"plain text unchanged", "hello, world", "hello, world"},
		{"tab newline carriage return kept", "a\tb\nc\r\nd", "a\tb\nc\r\nd"},
		{"C0 controls", "\x01\x02start\x07bell\x08bs\x0bvt\x0cff\x0e\x1fend", "startbellbsvtffend"},
		{"DEL", "del\x7f" + "ete", "delete"},
		{"C1 controls", "a\u0080b\u0085c\u009fd", "abcd"},
		{"U+00A0 and up are not C1", "nbsp\u00a0copy\u00a9 end\u00bf", "nbsp\u00a0copy\u00a9 end\u00bf"},
		{"SGR colour", "\x1b[31mred\x1b[0m plain", "red plain"},
		{"SGR with several parameters", "\x1b[1;32;40mbold green\x1b[m", "bold green"},
		{"private mode CSI", "\x1b[?25lhidden\x1b[?25h", "hidden"},
		{"cursor movement", "a\x1b[2Ab\x1b[10;20Hc\x1b[Kd", "abcd"},
		{"OSC title with BEL", "\x1b]0;window title\x07after", "after"},
		{"OSC hyperlink with ST", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"DCS string", "\x1bPq#0;2;0;0;0\x1b\\after", "after"},
		{"C1 CSI", "\u009b31mred", "red"},
		{"C1 OSC with C1 ST", "\u009d0;title\u009cafter", "after"},
		{"charset designation", "\x1b(Bcharset", "charset"},
		{"two-byte escapes", "\x1b7saved\x1b8", "saved"},
		{"lone ESC at end", "end\x1b", "end"},
		{"ESC before non-ASCII", "x\x1bé", "xé"},
		{"unterminated CSI at end", "text\x1b[31", "text"},
		{"malformed CSI keeps the odd byte", "a\x1b[12é", "aé"},
		{"OSC ended by a line end keeps its text", "a\x1b]0;not a title\nnext", "a0;not a title\nnext"},
		{"OSC cut off by another escape", "\x1b]0;t\x1b[1mbold", "bold"},
		{"stripping forms no new sequence", "\x1b\x1b[31m[0m", "[0m"},
		{"unicode kept", "héllo wörld 日本語 🎉 \u200b\u202e", "héllo wörld 日本語 🎉 \u200b\u202e"},
		{"empty", "", ""},
		// The edges of each byte range an escape sequence is read by.
		{"nF escape, lowest intermediate byte", "\x1b Fx", "x"},
		{"nF escape, highest intermediate byte", "\x1b/Ax", "x"},
		{"nF escape, lowest final byte", "\x1b(0x", "x"},
		{"nF escape, highest final byte", "\x1b(~x", "x"},
		{"nF escape without a final byte", "\x1b(\x7fx", "x"},
		{"CSI, lowest intermediate byte", "\x1b[1 qX", "X"},
		{"CSI, highest intermediate byte", "\x1b[1/qX", "X"},
		{"CSI, lowest final byte", "\x1b[1@X", "X"},
		{"CSI, highest final byte", "\x1b[1~X", "X"},
		{"CSI ended by a byte past the final range", "\x1b[1\x7fX", "X"},
		{"CSI cut off by a C0 control", "\x1b[1\x01X", "X"},
		{"OSC cut off by a C1 CSI, which is stripped whole", "\x1b]0;t\u009b31mX", "X"},
		{"OSC cut off by another C1", "\x1b]0;t\u0085X", "X"},
		{"OSC with ESC as the last byte", "a\x1b]0;title\x1b", "a"},
		// What ends an OSC is the byte after its ESC or C1, never the one
		// before: a payload may end in a backslash, or in a character
		// whose last UTF-8 byte is that of ST (U+011C is C4 9C).
		{"OSC payload ending in a backslash, cut off by a CSI", "\x1b]0;a\\\x1b[1mX", "X"},
		{"OSC payload ending in U+011C, cut off by a C1 CSI", "\x1b]0;\u011c\u009b1mX", "X"},
		{"OSC cut off by a C0 control", "\x1b]0;t\x01X", "X"},
		{"OSC keeps going over a tab", "\x1b]0;a\tb\x07X", "X"},
		{"C1 range starts at U+0080", "a\u0080", "a"},
		{"C1 range ends at U+009F", "\u009fz\u00a0", "z\u00a0"},
		{"control in the last of eight bytes", "abcdefg\x01", "abcdefg"},
		{"control in the first of the second eight", "abcdefgh\x01", "abcdefgh"},
	})
}

// OUT-1: common credential shapes are redacted, keeping the text around
// them.
func TestTextRedactsCredentialShapes_OUT1(t *testing.T) {
	runTextCases(t, New(), []textCase{
		{"Authorization header keeps scheme", "Authorization: Bearer abc.def-123", "Authorization: Bearer [REDACTED]"},
		{"Authorization lower case Basic", "authorization: Basic dXNlcjpwYXNz\nnext", "authorization: Basic [REDACTED]\nnext"},
		{"Authorization without scheme", "Proxy-Authorization: c2VjcmV0", "Proxy-Authorization: [REDACTED]"},
		{"Authorization in curl command", `curl -H "Authorization: token abc123" https://api`, `curl -H "Authorization: token [REDACTED]" https://api`},
		{"Authorization as JSON", `{"Authorization":"Bearer abc"}`, `{"Authorization":"Bearer [REDACTED]"}`},
		{"Bearer in prose", "use Bearer abcdefgh12345 here", "use Bearer [REDACTED] here"},
		{"BEARER upper case", "BEARER abcdefgh12345", "BEARER [REDACTED]"},
		{"Bearer short word kept", "bearer bonds", "bearer bonds"},
		{"AWS AKIA", "id " + fakeAKIA + " ok", "id [REDACTED] ok"},
		{"AWS ASIA", fakeASIA, "[REDACTED]"},
		{"AWS too short kept", "AKIA123", "AKIA123"},
		{"AWS inside a longer word kept", "X" + fakeAKIA + "Z", "X" + fakeAKIA + "Z"},
		// An id is exactly 20 characters: a 21-character run that starts
		// like one is some other word, and is not cut in two.
		{"AWS prefix of a longer run kept", fakeAKIA + "Z", fakeAKIA + "Z"},
		{"AWS prefix of a longer lower-case run kept", "key " + fakeASIA + "abc", "key " + fakeASIA + "abc"},
		{"AWS id followed by punctuation", fakeAKIA + ",next", "[REDACTED],next"},
		{"GitHub ghp", "token " + fakeGitHub + ".", "token [REDACTED]."},
		{"GitHub gho ghu ghs ghr", "gho_" + fakeGitHub[4:] + " ghu_" + fakeGitHub[4:] + " ghs_" + fakeGitHub[4:] + " ghr_" + fakeGitHub[4:],
			"[REDACTED] [REDACTED] [REDACTED] [REDACTED]"},
		{"GitHub fine-grained PAT", "pat=" + fakeGitHubPAT, "pat=[REDACTED]"},
		{"GitHub env var", "GITHUB_TOKEN=" + fakeGitHub, "GITHUB_TOKEN=[REDACTED]"},
		{"Slack bot", "slack " + fakeSlack + " done", "slack [REDACTED] done"},
		{"Slack other prefixes", "xoxp-123456789012 xoxa-123456789012 xoxr-123456789012", "[REDACTED] [REDACTED] [REDACTED]"},
		{"Slack app-level", fakeSlackApp, "[REDACTED]"},
		{"sk key", "key: " + fakeSK, "key: [REDACTED]"},
		{"sk project key", "(" + fakeSKProj + ")", "([REDACTED])"},
		{"sk Anthropic-style key", fakeSKAnt, "[REDACTED]"},
		{"sk too short kept", "sk-short", "sk-short"},
		{"sk inside word kept", "task-abcdefghijklmnopqrstuvwxyz", "task-abcdefghijklmnopqrstuvwxyz"},
		{"JWT", "jwt " + fakeJWT + " end", "jwt [REDACTED] end"},
		{"RSA private key", "before\n" + pem("RSA PRIVATE KEY", fakeKeyBody) + "\nafter", "before\n[REDACTED]\nafter"},
		{"PKCS8 private key", pem("PRIVATE KEY", fakeKeyBody), "[REDACTED]"},
		{"OpenSSH private key", "k=" + pem("OPENSSH PRIVATE KEY", fakeKeyBody), "k=[REDACTED]"},
		{"PGP private key block", pem("PGP PRIVATE KEY BLOCK", "\n"+fakeKeyBody), "[REDACTED]"},
		{"private key in JSON string", `{"key":"` + strings.ReplaceAll(pem("EC PRIVATE KEY", fakeKeyBody), "\n", `\n`) + `"}`, `{"key":"[REDACTED]"}`},
		{"private key cut off", "-----BEGIN RSA PRIVATE KEY-----\n" + fakeKeyBody + "\n\nThat was all.", "[REDACTED]\n\nThat was all."},
		{"certificate kept", pem("CERTIFICATE", fakeKeyBody), pem("CERTIFICATE", fakeKeyBody)},
		{"two private keys, each whole", pem("RSA PRIVATE KEY", fakeKeyBody) + "\nbetween\n" + pem("EC PRIVATE KEY", fakeKeyBody) + "\nafter",
			"[REDACTED]\nbetween\n[REDACTED]\nafter"},
		{"END glued to BEGIN", "k -----BEGIN RSA PRIVATE KEY----------END RSA PRIVATE KEY----- z", "k [REDACTED] z"},
		// A cut-off key inside a JSON string has escaped line breaks: its
		// body runs over them, and stops at the first line that is not
		// base64 or a header.
		{"private key cut off in JSON, escaped line feeds", `{"k":"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq1W2e3R4\n\nThat was all."}`,
			`{"k":"[REDACTED]\n\nThat was all."}`},
		{"private key cut off in JSON, escaped CR LF", `{"k":"-----BEGIN RSA PRIVATE KEY-----\r\nMIIEowIBAAKCAQEA\r\nq1W2e3R4\r\nThat was all."}`,
			`{"k":"[REDACTED]\r\nThat was all."}`},
		{"private key cut off, a backslash that escapes no line break ends it", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\\tq1W2\nafter",
			"[REDACTED]\nMIIEowIBAAKCAQEA\\tq1W2\nafter"},
		{"private key cut off, a line starting ': ' is no header", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nMIIEowIBAAKCAQEA\n: x\nafter",
			"[REDACTED]\n: x\nafter"},
		{"private key cut off by the end of the text", "k=-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq1W2e3R4", "k=[REDACTED]"},
		{"JWT at the very start", fakeJWT + " end", "[REDACTED] end"},
		{"GitHub fine-grained PAT at the very start", fakeGitHubPAT + " end", "[REDACTED] end"},
		{"password=", "login password=hunter2 ok", "login password=[REDACTED] ok"},
		{"env var suffix", "DB_PASSWORD=s3cr3t!\nPORT=5432", "DB_PASSWORD=[REDACTED]\nPORT=5432"},
		{"secret colon", "secret: opensesame", "secret: [REDACTED]"},
		{"query string", "https://x.test/cb?api_key=abc123&page=2", "https://x.test/cb?api_key=[REDACTED]&page=2"},
		{"JSON pair", `{"token": "abc", "n": 1}`, `{"token": "[REDACTED]", "n": 1}`},
		{"JSON inside JSON string", `"{\"token\":\"abc\"}"`, `"{\"token\":\"[REDACTED]\"}"`},
		{"single quotes", "token='abc def'", "token='[REDACTED]'"},
		{"Go short assignment", `apiKey := "k-123"`, `apiKey := "[REDACTED]"`},
		{"fat arrow", `'password' => 'pw'`, `'password' => '[REDACTED]'`},
		{"AWS secret access key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key = [REDACTED]"},
		{"X-Api-Key header", "X-Api-Key: abc123", "X-Api-Key: [REDACTED]"},
		{"passphrase", "PASSPHRASE=correct-horse", "PASSPHRASE=[REDACTED]"},
		{"empty value kept", "token=\nnext", "token=\nnext"},
		{"JSON null kept", `{"token": null}`, `{"token": null}`},
		{"login glued to its colon kept", `wrote as token:ci and secret:v2`, `wrote as token:ci and secret:v2`},
		{"colon then blank is a pair", `token: abcdef123`, `token: [REDACTED]`},
		{"comparison kept", "if password == other", "if password == other"},
		{"other keys kept", "max_tokens=100 tokens: 5 token_count=3 description: x", "max_tokens=100 tokens: 5 token_count=3 description: x"},
		{"pair nested in a value", "password=x:authorization: Bearer abc def", "password=[REDACTED] Bearer [REDACTED]"},
		{"header name in capitals", "AUTHORIZATION: Bearer abcdefgh123", "AUTHORIZATION: Bearer [REDACTED]"},
		{"header name in capitals, no scheme", "AUTHORIZATION: c2VjcmV0", "AUTHORIZATION: [REDACTED]"},
		{"unquoted value ends at a quote", `token=abc"def`, `token=[REDACTED]"def`},
		// Where a pair sits in the text changes nothing: the look-back
		// from its ':' or '=' is bounded by distance, not by position.
		{"blank before '=' far into the text", strings.Repeat("x ", 40) + "token = hunter2", strings.Repeat("x ", 40) + "token = [REDACTED]"},
		{"quoted header far into the text", strings.Repeat("y", 70) + ` curl -H "Authorization: token abc123" https://api`,
			strings.Repeat("y", 70) + ` curl -H "Authorization: token [REDACTED]" https://api`},
		// A key and its '=' may be up to 64 blanks apart, not more.
		{"64 blanks between key and '='", "token" + strings.Repeat(" ", 64) + "=hunter2", "token" + strings.Repeat(" ", 64) + "=[REDACTED]"},
		{"65 blanks between key and '='", "token" + strings.Repeat(" ", 65) + "=hunter2", "token" + strings.Repeat(" ", 65) + "=hunter2"},
		{"64 blanks inside escaped quotes", `\"token\"` + strings.Repeat(" ", 64) + `: "hunter2"`, `\"token\"` + strings.Repeat(" ", 64) + `: "[REDACTED]"`},
		{"63 blanks before ':='", `\"token\"` + strings.Repeat(" ", 63) + `:= "hunter2"`, `\"token\"` + strings.Repeat(" ", 63) + `:= "[REDACTED]"`},
		// A header inside a quoted string ends at the quote; the quote is
		// looked for across at most 128 characters of header name.
		{"quoted header with a 128-character name", `"` + strings.Repeat("x", 115) + `authorization: Bearer abc def" tail`,
			`"` + strings.Repeat("x", 115) + `authorization: Bearer [REDACTED]" tail`},
		{"quoted header with a 129-character name", `"` + strings.Repeat("x", 116) + `authorization: Bearer abc def" tail`,
			`"` + strings.Repeat("x", 116) + `authorization: Bearer [REDACTED]`},
		{"key at the very start", "=token: abc", "=token: [REDACTED]"},
		{"separator at the very start", ": x = y", ": x = y"},
	})
}

// OUT-1: configured secret values are redacted wherever they occur;
// values shorter than 8 bytes are ignored.
func TestTextRedactsConfiguredSecrets_OUT1(t *testing.T) {
	cases := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"single value", []string{"correct-horse-battery"}, "pw is correct-horse-battery.", "pw is [REDACTED]."},
		{"every occurrence", []string{"hunter2hunter2"}, "hunter2hunter2 and hunter2hunter2", "[REDACTED] and [REDACTED]"},
		{"exactly 8 bytes", []string{"12345678"}, "pin 12345678", "pin [REDACTED]"},
		{"shorter than 8 ignored", []string{"admin", "1234567"}, "admin 1234567", "admin 1234567"},
		{"overlapping values merge", []string{"abcdefgh1234", "1234WXYZ5678"}, "x abcdefgh1234WXYZ5678 y", "x [REDACTED] y"},
		{"one inside another", []string{"password1234567", "word1234"}, "password1234567 word1234", "[REDACTED] [REDACTED]"},
		{"self-overlapping occurrences", []string{"abababab"}, "abababababab", "[REDACTED]"},
		{"values sharing their rare byte", []string{"Zaaaaaaaa", "bbbbbbbZ", "ccccZcccc"}, "bbbbbbbZaaaaaaaa ccccZcccc", "[REDACTED] [REDACTED]"},
		{"long value", []string{strings.Repeat("long-secret-", 10)}, "<" + strings.Repeat("long-secret-", 10) + ">", "<[REDACTED]>"},
		// A long value that begins the way it ends can occur twice with
		// the second occurrence starting inside the first; stepping past
		// the whole first match would show the rest of the second.
		{"long value overlapping itself", []string{longEdge + longMiddle + longEdge},
			"<" + longEdge + longMiddle + longEdge + longMiddle + longEdge + ">", "<[REDACTED]>"},
		{"long value overlapping itself, tail not doubled", []string{longEdge + longMiddle + longEdge},
			longEdge + longMiddle + longEdge + longMiddle, "[REDACTED]" + longMiddle},
		{"adjacent values stay two", []string{"AAAAAAAA", "BBBBBBBB"}, "AAAAAAAABBBBBBBB", "[REDACTED][REDACTED]"},
		{"duplicates", []string{"samesame", "samesame"}, "samesame", "[REDACTED]"},
		{"value with control characters matches stripped text", []string{"sec\x1b[0mret-value"}, "secret-value", "[REDACTED]"},
		{"found after stripping the text", []string{"secret-value"}, "sec\x1b[1mret-value", "[REDACTED]"},
		{"value starting with a control character", []string{"\x07secret-value"}, "a secret-value", "a [REDACTED]"},
		{"value ending in half a UTF-8 character", []string{"secret-value\xc2"}, "secret-value", "secret-value"},
		{"part of the marker is ignored", []string{"REDACTED", "[REDACTED]"}, "token=abc REDACTED", "token=[REDACTED] REDACTED"},
		{"unicode value", []string{"пароль-секрет"}, "это пароль-секрет!", "это [REDACTED]!"},
		{"no values", nil, "nothing here", "nothing here"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runTextCases(t, New(tc.secrets...), []textCase{{tc.name, tc.in, tc.want}})
		})
	}
}

// OUT-1: SetSecrets replaces the whole set.
func TestSetSecretsReplaces_OUT1(t *testing.T) {
	s := New("first-secret-value")
	s.SetSecrets([]string{"second-secret-value"})
	got, _ := s.Text("first-secret-value second-secret-value")
	if want := "first-secret-value [REDACTED]"; got != want {
		t.Errorf("after SetSecrets got %q, want %q", got, want)
	}
	s.SetSecrets(nil)
	if got, _ := s.Text("second-secret-value"); got != "second-secret-value" {
		t.Errorf("after SetSecrets(nil) got %q", got)
	}
	var zero Sanitizer // not documented as usable, but must not panic
	if got, err := zero.Text("a\x07b"); err != nil || got != "ab" {
		t.Errorf("zero Sanitizer: %q, %v", got, err)
	}
}

// OUT-1: a Sanitizer is safe for concurrent use, including SetSecrets
// while sanitising (run with -race).
func TestConcurrentUse_OUT1(t *testing.T) {
	s := New("concurrent-secret-1")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if g == 0 && i%10 == 0 {
					s.SetSecrets([]string{fmt.Sprintf("concurrent-secret-%d", i%3)})
				}
				out, err := s.Text("x concurrent-secret-1 \x1b[1my")
				if err != nil || strings.Contains(out, "\x1b") {
					t.Errorf("Text: %q, %v", out, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// OUT-1: bytes posing as text are rejected with a sentence, never repaired.
func TestTextRejectsBinary_OUT1(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		reason string
		offset int
	}{
		{"NUL byte", "abc\x00def", "a NUL byte", 3},
		{"invalid byte", "ok \xff", "invalid UTF-8", 3},
		{"truncated rune", "日本\xe8\xaa", "invalid UTF-8", 6},
		{"encoded surrogate", "a\xed\xa0\x80", "invalid UTF-8", 1},
		{"overlong encoding", "\xc0\xaf", "invalid UTF-8", 0},
		{"NUL before invalid", "\x00\xff", "a NUL byte", 0},
		{"invalid before NUL", "\xff\x00", "invalid UTF-8", 0},
		{"binary behind a control character", "\x1b[1m\xfe", "invalid UTF-8", 4},
	}
	s := New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Text(tc.in)
			if err == nil {
				t.Fatalf("Text(%q) = %q, want an error", tc.in, got)
			}
			if got != "" {
				t.Errorf("Text returned text %q with its error", got)
			}
			if !errors.Is(err, ErrBinary) {
				t.Errorf("error %v is not ErrBinary", err)
			}
			var be *BinaryError
			if !errors.As(err, &be) || be.Reason != tc.reason || be.Offset != tc.offset {
				t.Errorf("error %#v, want reason %q at %d", err, tc.reason, tc.offset)
			}
			want := fmt.Sprintf("the text held binary data (%s at byte %d); binary data must be sent as image, audio or blob resource content", tc.reason, tc.offset)
			if err.Error() != want {
				t.Errorf("message %q\nwant %q", err, want)
			}
		})
	}
}

// fiveMiB builds about 5 MiB of varied, clean text: log lines, JSON, code
// and prose with non-ASCII letters, none of it a credential.
func fiveMiB() string {
	parts := []string{
		"2024-05-01T12:00:00Z INFO served path=/api/v1/items status=200 duration=12ms user=alice\n",
		`{"id": 12345, "name": "widget", "tags": ["a", "b"], "price": 9.99, "description": "Ein kleines Gerät"},` + "\n",
		"func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tuser_id := r.URL.Query().Get(\"user_id\")\n}\n",
		"It was the best of times, it was the worst of times — 日本語のテキスト, ça va.\n",
	}
	var b strings.Builder
	for i := 0; b.Len() < 5<<20; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()
}

// OUT-1: nothing is truncated. A 5 MiB result comes out whole and, having
// nothing to strip or redact, byte-identical.
func TestText5MiBPassesWhole_OUT1(t *testing.T) {
	in := fiveMiB()
	if len(in) < 5<<20 {
		t.Fatalf("test text is only %d bytes", len(in))
	}
	out, err := New("a-configured-secret").Text(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) || out != in {
		t.Fatalf("5 MiB text changed: got %d bytes, want %d", len(out), len(in))
	}
}

// OUT-1: a 5 MiB text with something to strip and redact at its very end
// loses only those bytes.
func TestText5MiBDirtyKeepsTheRest_OUT1(t *testing.T) {
	in := fiveMiB()
	dirty := "\x1b[31m" + in + " password=hunter2\x1b[0m"
	out, err := New().Text(dirty)
	if err != nil {
		t.Fatal(err)
	}
	if want := in + " password=[REDACTED]"; out != want {
		t.Fatalf("got %d bytes ending %q, want %d bytes", len(out), out[max(0, len(out)-40):], len(want))
	}
}

// OUT-1: text is scanned in chunks; nothing may be missed where a secret,
// a credential, a C1 control or a bad byte straddles a chunk boundary.
func TestChunkBoundaries_OUT1(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 8) // 128 bytes: the long-value path
	s := New("boundary-secret-value", long)
	items := []struct{ in, want string }{
		{"boundary-secret-value", Redacted},
		{long, Redacted},
		{fakeGitHub, Redacted},
		{fakeJWT, Redacted},
		{"password=hunter2", "password=" + Redacted},
		{pem("RSA PRIVATE KEY", fakeKeyBody), Redacted},
		{"a\u0085b", "ab"},
		{"\x1b[31mred", "red"},
	}
	for _, it := range items {
		for off := chunkSize - len(it.in) - 2; off <= chunkSize+2; off++ {
			pad := strings.Repeat("x", off) + " "
			got, err := s.Text(pad + it.in + " tail")
			if want := pad + it.want + " tail"; err != nil || got != want {
				t.Fatalf("%q at offset %d: got ...%q, %v", it.in, off, got[max(0, len(got)-len(want)+off):], err)
			}
		}
	}
	// Valid text is valid whichever byte of a two-, three- or four-byte
	// character a chunk would end on.
	for off := chunkSize - 4; off <= chunkSize+1; off++ {
		for _, r := range []string{"é", "日", "🎉"} {
			in := strings.Repeat("a", off) + r + r + "\u0085tail"
			got, err := s.Text(in)
			if want := strings.Repeat("a", off) + r + r + "tail"; err != nil || got != want {
				t.Fatalf("%q at offset %d: %v", r, off, err)
			}
		}
	}
	for off := chunkSize - 3; off <= chunkSize+1; off++ {
		in := strings.Repeat("é", off/2) + "\xff"
		var be *BinaryError
		if _, err := s.Text(in); !errors.As(err, &be) || be.Offset != len(in)-1 {
			t.Fatalf("invalid byte at %d: %v", len(in)-1, err)
		}
	}
}
