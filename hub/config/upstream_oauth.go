package config

import (
	"strings"

	"github.com/crewlet/hub/servers/upstream/launch"
)

// AuthOAuth is the one value of mcp_servers[].auth: the server is dialled
// with each seat's own access token, granted by a person at the server's
// authorization server through the screen (issue 26; CFG-3: until the
// grant exists the seat's child waits for it).
const AuthOAuth = "oauth"

// ServerOAuth is the client the hub is at a server's authorization server.
// Left out, the hub registers itself where the authorization server offers
// dynamic client registration (RFC 7591).
type ServerOAuth struct {
	ClientID string `yaml:"client_id" validate:"max=512"`
	// ClientSecret is for a confidential client; a ${VAR} reference, never
	// a literal, since the company file is no place for a credential.
	ClientSecret string   `yaml:"client_secret" validate:"max=512"`
	Scopes       []string `yaml:"scopes" validate:"dive,max=200"`
}

// UsesOAuth says whether each seat's child carries the seat's own grant.
func (s MCPServer) UsesOAuth() bool { return s.Auth == AuthOAuth }

// checkServerOAuth refuses what cannot mint a seat's grant: a shared
// server (it acts as nobody's seat), a stdio one (it is not dialled), a
// client block without auth: oauth, and a literal client secret.
func checkServerOAuth(p string, s MCPServer, add func(string, ...any)) {
	if !s.UsesOAuth() {
		if s.OAuth != nil {
			add("%s.oauth: a client is only used with auth: oauth; add it or remove the block", p)
		}
		return
	}
	if s.IsShared() {
		add("%s.auth: oauth grants each seat its own token, so the server must say shared: false", p)
	}
	if t := s.EffectiveTransport(); t != "http" && t != "sse" {
		add("%s.auth: oauth is for a server dialled at its url (transport http or sse), not %s", p, t)
	}
	o := s.OAuth
	if o == nil {
		return
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		add("%s.oauth.client_secret: a secret without client_id names no client", p)
	}
	if o.ClientSecret != "" && !(strings.HasPrefix(o.ClientSecret, "${") && strings.HasSuffix(o.ClientSecret, "}")) {
		// The file names no data directory, so the command is said with
		// the flag the hub's own store may need.
		add("%s.oauth.client_secret: write a ${VAR} reference, not the secret itself, and seal the secret as VAR in the hub's store (`%s`, adding the --data-dir the hub is started with, if any)",
			p, launch.SealCommand("VAR", ""))
	}
	for _, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\n") {
			add("%s.oauth.scopes: %q is not one scope", p, sc)
		}
	}
}
