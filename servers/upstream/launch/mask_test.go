package launch

import "testing"

// MCP-12: a launch shows every ${VAR} as written and no literal that could
// be a credential, whether it is a whole value, beside a reference, in a
// URL's userinfo or in its query.
func TestMaskValue(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"${TOKEN}":                 "${TOKEN}",
		"Bearer ${TOKEN}":          "Bearer ${TOKEN}",
		"token\t${T}":              "token\t${T}",
		"${USER}:${PASS}":          "${USER}:${PASS}",
		"literal-configured-value": "(literal, 24 characters)",
		"sk-live-${REST}":          "(literal, 8 characters)${REST}",
		"${A}abcdefghijklmnop":     "${A}(literal, 16 characters)",
		"Bearer sk-${X}":           "(literal, 10 characters)${X}",
		"${HOME}/memory.json":      "${HOME}(literal, 12 characters)",
		"${NOT A REF}":             "(literal, 12 characters)",
		"$${X}":                    "$${X}",
		"é${X}":                    "(literal, 1 character)${X}",
		"${A}-${B}":                "${A}-${B}",
		"Bearer":                   "(literal, 6 characters)",
		"Basic ${CREDENTIALS}":     "Basic ${CREDENTIALS}",
		"x${A}":                    "(literal, 1 character)${A}",
		// A scheme word with nothing after it but a reference.
		"Bearer${X}": "(literal, 6 characters)${X}",
	} {
		if got := MaskValue(in); got != want {
			t.Errorf("MaskValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMaskURLs(t *testing.T) {
	for in, want := range map[string]string{
		"https://search.example.com/mcp":                    "https://search.example.com/mcp",
		"http://user:pass@h:8080/mcp?api_key=abc123&v=${V}": "http://(literal, 4 characters):(literal, 4 characters)@h:8080/mcp?api_key=(literal, 6 characters)&v=${V}",
		"https://${GH_TOKEN}@github.com/x":                  "https://${GH_TOKEN}@github.com/x",
		"https://${HOST}/mcp?key=${KEY}":                    "https://${HOST}/mcp?key=${KEY}",
		"https://h/p#frag-token":                            "https://h/p#(literal, 10 characters)",
		"https://h/p?flag":                                  "https://h/p?flag",
		"--url=https://u:p@h/x then https://a@b/?t=1 end":   "--url=https://(literal, 1 character):(literal, 1 character)@h/x then https://(literal, 1 character)@b/?t=(literal, 1 character) end",
		`Post "http://user:xxxxx@127.0.0.1:9/mcp": refused`: `Post "http://(literal, 4 characters):(literal, 5 characters)@127.0.0.1:9/mcp": refused`,
		"no url here": "no url here",
		// A query or fragment straight after the host, and a URL with no
		// authority at all, are masked the same.
		"https://h?api_key=abc123":    "https://h?api_key=(literal, 6 characters)",
		"https://h#frag-token":        "https://h#(literal, 10 characters)",
		"file:///srv/data?key=s3cr3t": "file:///srv/data?key=(literal, 6 characters)",
	} {
		if got := MaskURLs(in); got != want {
			t.Errorf("MaskURLs(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}
