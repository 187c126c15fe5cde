package config

import (
	"strings"
	"testing"
)

// An identity provider's tokens act as a person's seat (issue 26, OPS-4):
// the check refuses what the hub could not use, and identities that would
// name nobody, an agent, or two seats at once.
func TestOAuthCheck(t *testing.T) {
	const people = `units: [{id: core, name: Core, roles: [
  {name: Ada, handle: ada, kind: human, admin: true, oidc_subject: "u-1", email: ada@example.com},
  {name: Bob, handle: bob, kind: human, email: bob@example.com}]}]
`
	c, err := Parse([]byte(people + `api: {auth: {oauth: {issuer: "https://id.example.com", audience: crewlet, required_scopes: [crewlet]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := c.OAuthPeople()
	if len(got) != 2 || got[0] != (OAuthPerson{Seat: "ada", Subject: "u-1", Email: "ada@example.com", Admin: true}) || got[1].Seat != "bob" {
		t.Fatalf("people %+v", got)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"plain http elsewhere", people + `api: {auth: {oauth: {issuer: "http://id.example.com"}}}`, "reached over HTTPS"},
		{"not a url", people + `api: {auth: {oauth: {issuer: "id.example.com"}}}`, "not an absolute http(s) URL"},
		{"no issuer", people + `api: {auth: {oauth: {audience: x}}}`, "api.auth.oauth.issuer"},
		{"scope with a space", people + `api: {auth: {oauth: {issuer: "https://id.example.com", required_scopes: ["a b"]}}}`, "is not a scope"},
		{"nobody named", `units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true}]}]
api: {auth: {oauth: {issuer: "https://id.example.com"}}}`, "every token from the issuer would be refused"},
		{"agent named", `units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true, email: a@x.io}, {name: Bot, handle: bot, oidc_subject: s}]}]
api: {auth: {oauth: {issuer: "https://id.example.com"}}}`, "this seat is an agent"},
		{"two seats one subject", `units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true, oidc_subject: s}, {name: Bo, handle: bo, kind: human, oidc_subject: s}]}]
api: {auth: {oauth: {issuer: "https://id.example.com"}}}`, "is already the subject of"},
		{"no provider", people, "api.auth.oauth declares none"},
		{"bad email", `units: [{id: core, name: Core, roles: [{name: Ada, handle: ada, kind: human, admin: true, email: not-an-email}]}]
api: {auth: {oauth: {issuer: "https://id.example.com"}}}`, "roles[0].email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte(people + `api: {auth: {oauth: {issuer: "http://127.0.0.1:9999/"}}}`)); err != nil {
		t.Fatalf("a provider on loopback over plain http is for tests and local providers: %v", err)
	}
}
