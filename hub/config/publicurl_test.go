package config

import (
	"strings"
	"testing"
)

// The hub's resource identity is configured (issue 36): api.public_url is
// one URL or a list, each an absolute http(s) URL; config check refuses
// anything a client could not be sent to.
func TestPublicURLCheck(t *testing.T) {
	const base = "units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]\n"
	for doc, want := range map[string][]string{
		`api: {public_url: "https://hub.example.com/"}`:                       {"https://hub.example.com"},
		`api: {public_url: [https://a.example.com, "http://127.0.0.1:8420"]}`: {"https://a.example.com", "http://127.0.0.1:8420"},
		`api: {}`: {},
	} {
		c, err := Parse([]byte(base + doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if got := c.PublicURLs(); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: public URLs %q, want %q", doc, got, want)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{`api: {public_url: hub.example.com}`, `api.public_url: "hub.example.com" is not an absolute http(s) URL`},
		{`api: {public_url: "ftp://hub.example.com"}`, "is not an absolute http(s) URL"},
		{`api: {public_url: "http://127.0.0.1:abc"}`, "is not an absolute http(s) URL"},
		{`api: {public_url: "https://hub.example.com/?x=1"}`, "has credentials, a query or a fragment"},
		{`api: {public_url: "https://u:p@hub.example.com"}`, "has credentials, a query or a fragment"},
		{`api: {public_url: [https://a.example.com, "https://a.example.com/"]}`, "api.public_url[1]: \"https://a.example.com/\" is listed twice"},
		{`api: {public_url: {host: a}}`, "public_url"},
	} {
		_, err := Parse([]byte(base + tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.doc, err, tc.want)
		}
	}
}
