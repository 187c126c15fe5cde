package config

import (
	"strings"
	"testing"
)

// CFG-2, CFG-3: a literal oauth.client_secret is refused with the way to
// seal it instead, and the sealing command is said with the data
// directory a hub started with --data-dir reads its store from: the bare
// command seals into ./.crewlet, where such a hub never looks.
func TestLiteralClientSecretSaysTheDataDir(t *testing.T) {
	const company = `units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
mcp_servers:
  - {name: github, url: "https://api.example.com/mcp", transport: http, shared: false, auth: oauth,
     oauth: {client_id: hub, client_secret: s3cret-literal}}
`
	_, err := Parse([]byte(company))
	if err == nil {
		t.Fatal("a literal client secret was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "oauth.client_secret: write a ${VAR} reference") ||
		!strings.Contains(msg, "`crewlet secrets set VAR`, adding the --data-dir the hub is started with") {
		t.Fatalf("the refusal: %s", msg)
	}
	if strings.Contains(msg, "s3cret-literal") {
		t.Fatalf("the refusal quotes the secret: %s", msg)
	}
}
