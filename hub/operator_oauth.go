package hub

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/oauth"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// The operator surface as an OAuth 2.1 resource server (issue 26): beside
// the company file's static tokens, the access tokens of the company's
// identity provider. Both are one chain in authenticate; what a client
// needs to find the provider is served here.

// mcpPath is the operator catalogue's route; its metadata document is
// served under that path too (RFC 9728 §3.1), as MCP clients look there.
const (
	mcpPath          = "/operator/mcp"
	resourceMetaPath = "/.well-known/oauth-protected-resource"
)

// oauthConfig is the revision's identity provider, or nil.
func oauthConfig(c *config.Company) *oauth.Config {
	o := c.API.Auth.OAuth
	if o == nil {
		return nil
	}
	cfg := &oauth.Config{Issuer: o.Issuer, Audience: o.Audience, Scopes: append([]string(nil), o.RequiredScopes...)}
	for _, p := range c.OAuthPeople() {
		cfg.People = append(cfg.People, oauth.Person{Seat: p.Seat, Subject: p.Subject, Email: p.Email, Admin: p.Admin})
	}
	return cfg
}

// verifyBearer is the one authenticator chain: the static tokens, then the
// identity provider's. A refusal says why in the provider's terms.
func (f *operator) verifyBearer(ctx context.Context, r *http.Request, token string) (authority.Principal, *oauth.Refusal) {
	if p, ok := f.tokens.Verify(token); ok {
		return p, nil
	}
	if f.oauth == nil || !f.oauth.Enabled() {
		return authority.Principal{}, &oauth.Refusal{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: "unknown or revoked token"}
	}
	p, err := f.oauth.Verify(ctx, token, resourceURLs(r))
	if err != nil {
		ref, ok := err.(*oauth.Refusal)
		if !ok {
			ref = &oauth.Refusal{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: err.Error()}
		}
		return authority.Principal{}, ref
	}
	return p, nil
}

// refuseBearer answers a request whose credential was missing or refused:
// 401, or 403 for a token that is good but not enough, with a challenge
// that names where to sign in (RFC 6750 §3, RFC 9728 §5.1) and a sentence.
func (f *operator) refuseBearer(w http.ResponseWriter, r *http.Request, ref *oauth.Refusal) {
	f.refusals.note(slog.LevelInfo, "operator_auth_refused", ref.Reason, "path", clip(r.URL.Path), "remote", r.RemoteAddr, "status", ref.Status)
	params := []string{`realm="crewlet"`}
	if f.oauth != nil && f.oauth.Enabled() {
		params = append(params, `resource_metadata="`+resourceMetadataURL(r)+`"`)
		if s := f.oauth.Scopes(); len(s) > 0 {
			params = append(params, `scope="`+strings.Join(s, " ")+`"`)
		}
		if ref.Code != "" {
			params = append(params, `error="`+ref.Code+`"`, `error_description="`+quotable(ref.Reason)+`"`)
		}
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	prefix := "Unauthorized: "
	switch ref.Status {
	case http.StatusForbidden:
		prefix = "Forbidden: "
	case http.StatusServiceUnavailable:
		prefix = "Service Unavailable: "
	}
	http.Error(w, prefix+ref.Reason, ref.Status)
}

// registerOAuth serves the protected-resource metadata: at the root for
// the hub as a whole, and under the catalogue's path for /operator/mcp.
// With no identity provider configured there is none to describe.
func (f *operator) registerOAuth(mux *http.ServeMux) {
	serve := func(resource func(*http.Request) string) http.Handler {
		return f.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			meta := f.oauth.Metadata(resource(r))
			if meta == nil {
				http.Error(w, "Not Found: this hub accepts no identity provider's tokens; its operator credentials are the company file's tokens.", http.StatusNotFound)
				return
			}
			auth.ProtectedResourceMetadataHandler(meta).ServeHTTP(w, r)
		}))
	}
	mux.Handle(resourceMetaPath, serve(origin))
	mux.Handle(resourceMetaPath+mcpPath, serve(func(r *http.Request) string { return origin(r) + mcpPath }))
}

// origin is the scheme and host the request reached the hub at. The Host
// was checked by guard: a loopback name or one the hub was told to allow.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// resourceURLs are the URLs a token presented here may have been issued
// for: the catalogue's (what MCP clients ask for) and the hub's root.
func resourceURLs(r *http.Request) []string {
	o := origin(r)
	return []string{o + mcpPath, o}
}

// resourceMetadataURL is the metadata document that describes what the
// request reached.
func resourceMetadataURL(r *http.Request) string {
	if r.URL.Path == mcpPath {
		return origin(r) + resourceMetaPath + mcpPath
	}
	return origin(r) + resourceMetaPath
}

// quotable makes a sentence fit a quoted-string of a challenge, whose
// error_description may not hold quotes or backslashes (RFC 6750 §3).
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return '\''
		}
		return r
	}, s)
}
