package sanitize

import (
	"encoding/base64"
	"strings"
	"testing"
)

// OUT-1: a configured secret is redacted where it appears base64-encoded
// from its first byte, in the standard or the URL alphabet, padded or not,
// alone or with more encoded after it (a Basic credential, an encoded
// config), in results and in the log alike. Nothing of it but the last
// group's at most two bytes is left readable.
func TestSecretRedactedBase64Encoded(t *testing.T) {
	secret := "s3cret?>value~~" // '?' and '>' encode differently in the two alphabets
	s := New(secret)
	for name, enc := range map[string]string{
		"standard":      base64.StdEncoding.EncodeToString([]byte(secret)),
		"url":           base64.URLEncoding.EncodeToString([]byte(secret)),
		"unpadded":      base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"followed":      base64.StdEncoding.EncodeToString([]byte(secret + "\n{\"more\": true}")),
		"url, followed": base64.URLEncoding.EncodeToString([]byte(secret + ":rest")),
	} {
		in := "config: " + enc + " end"
		out, err := s.Text(in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, Redacted) || strings.Contains(out, enc[:len(secret)/3*4]) {
			t.Errorf("%s: %q came out %q", name, in, out)
		}
		if logged := s.RedactSecrets(in); logged == in {
			t.Errorf("%s: the log kept %q", name, in)
		}
	}
	// Text that merely looks like base64 is left alone.
	if out, _ := s.Text("aGVsbG8gd29ybGQ="); out != "aGVsbG8gd29ybGQ=" {
		t.Errorf("unrelated base64 changed: %q", out)
	}
}
