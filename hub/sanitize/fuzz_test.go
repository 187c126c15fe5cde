package sanitize

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzSecrets are configured while fuzzing; the seeds below contain them
// so the fuzzer has material to combine.
var fuzzSecrets = []string{"fuzz-secret-1234", "hunter2hunter2", "abcdefgh"}

// FuzzText checks the OUT-1 invariants of Text on arbitrary input:
//   - it never panics;
//   - it fails exactly when the input holds invalid UTF-8 or a NUL byte,
//     and then returns no text;
//   - otherwise its output is valid UTF-8 without C0 controls (other than
//     \n \r \t), DEL or C1 controls, and holds no configured secret;
//   - it is idempotent: sanitising its output changes nothing;
//   - it changes the text only by stripping or redacting: output that
//     differs from a control-free input must hold a redaction.
func FuzzText(f *testing.F) {
	seeds := []string{
		"", "plain text", "a\tb\nc\r\n",
		"\x1b[31mred\x1b[0m", "\x1b]0;title\x07x", "\x1b]8;;u\x1b\\l\x1b]8;;\x1b\\", "\u009b1m\u009d0;t\u009c",
		"\x1b(B\x1b7\x1b", "a\x1b]0;t\nb", "\x00", "\xff", "\xe8\xaa", "del\x7f", "c1\u0085",
		"Authorization: Bearer abc", `curl -H "Authorization: token x" u`, "Bearer abcdefgh12345",
		fakeAKIA, fakeASIA, fakeGitHub, fakeGitHubPAT, fakeSlack, fakeSlackApp, fakeSK, fakeSKAnt, fakeJWT,
		pem("RSA PRIVATE KEY", fakeKeyBody), "-----BEGIN PRIVATE KEY-----\nAAAA\n",
		"password=x&token=y", `{"api_key": "k", "secret": null}`, `\"token\":\"v\"`, "a := 'b' => c == d",
		"x fuzz-secret-1234 hunter2hunter2 abcdefgh abcdefghabcdefgh [REDACTED]",
		"token=[REDACTED]x", "Authorization: [REDACTED]", "hunter2hunter2bearer abcdefgh123",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	s := New(fuzzSecrets...)
	f.Fuzz(func(t *testing.T, in string) {
		// The fuzzer has no per-input time limit, so a hang would only
		// stall it. Crashing the worker makes it save the input.
		watchdog := time.AfterFunc(10*time.Second, func() {
			panic(fmt.Sprintf("Text(%q) has run for 10s", in))
		})
		defer watchdog.Stop()
		checkTextInvariants(t, s, in)
	})
}

// checkTextInvariants asserts the FuzzText invariants for one input.
func checkTextInvariants(t *testing.T, s *Sanitizer, in string) {
	t.Helper()
	// The quick look a short text gets first never passes over what the
	// full search would redact.
	if set := s.loadSecrets(); len(in) <= shortText && quiet(in, set) {
		if out, changed := scan(in, set); changed {
			t.Fatalf("%q looks quiet, yet the search redacts it to %q", in, out)
		}
	}
	{
		out, err := s.Text(in)
		binary := !utf8.ValidString(in) || strings.IndexByte(in, 0) >= 0
		if binary != (err != nil) {
			t.Fatalf("Text(%q) = %q, %v; input binary: %v", in, out, err, binary)
		}
		if err != nil {
			if out != "" || !errors.Is(err, ErrBinary) {
				t.Fatalf("Text(%q) failed with %q, %v", in, out, err)
			}
			return
		}
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q: invalid UTF-8", in, out)
		}
		for i, r := range out {
			if r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f {
				t.Fatalf("Text(%q) = %q: control %U at %d", in, out, r, i)
			}
		}
		for _, v := range fuzzSecrets {
			if strings.Contains(out, v) {
				t.Fatalf("Text(%q) = %q: secret %q left", in, out, v)
			}
		}
		again, err := s.Text(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: Text(%q) = %q, then %q, %v", in, out, again, err)
		}
		if out != in && firstControl(in) < 0 && !strings.Contains(out, Redacted) {
			t.Fatalf("Text(%q) = %q: changed without stripping or redacting", in, out)
		}
	}
}

// fragments are pieces of text that matter to the sanitiser. Gluing random
// ones together reaches interactions that byte-level mutation rarely
// assembles: a secret right before a bearer token, a marker inside a
// value, an escape sequence splitting a key.
var fragments = []string{
	"fuzz-secret-1234", "hunter2hunter2", "abcdefgh", "bearer ", "Bearer\t", "token", "password", "api_key",
	"Authorization", ":", "=", ":=", "=>", " ", "\t", "\n", "\r", `"`, "'", `\"`, "\\", "&", ",", ";", "]", "[",
	"[REDACTED]", "REDACTED", "\x1b", "\x1b[", "\x1b]", "\x07", "\x1b\\", "31m", "\u009b", "\u009c", "\u0085", "\x7f",
	"-", "-----BEGIN ", "RSA ", "PRIVATE KEY", "-----", "-----END ", "ghp_", "github_pat_", "xoxb-", "xapp-", "sk-",
	"AKIA", "ASIA", "eyJ", ".", "_", "0123456789", "ABCDEFGHIJKLMNOP", "abcdefghijklmnopqrstuvwxyz", "null", "é", "日本",
}

// OUT-1: the FuzzText invariants hold on many texts glued from fragments
// (deterministic, so a failure reproduces).
func TestTextInvariantsOnFragments_OUT1(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	rng := rand.New(rand.NewPCG(1, 2))
	s := New(fuzzSecrets...)
	var b strings.Builder
	for range n {
		b.Reset()
		for range 1 + rng.IntN(12) {
			b.WriteString(fragments[rng.IntN(len(fragments))])
		}
		checkTextInvariants(t, s, b.String())
		if t.Failed() {
			return
		}
	}
}
