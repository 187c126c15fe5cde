package hub

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
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
	p, err := f.oauth.Verify(ctx, token, f.resourceURLs())
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
		if meta := f.resourceMetadataURL(r); meta != "" {
			params = append(params, `resource_metadata="`+meta+`"`)
		}
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
	serve := func(path string) http.Handler {
		return f.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			base := f.resourceBase(r)
			meta := f.oauth.Metadata(base + path)
			if meta == nil {
				http.Error(w, "Not Found: this hub accepts no identity provider's tokens; its operator credentials are the company file's tokens.", http.StatusNotFound)
				return
			}
			if base == "" {
				http.Error(w, "Not Found: this hub does not know the URL it is reached at; an administrator sets api.public_url.", http.StatusNotFound)
				return
			}
			auth.ProtectedResourceMetadataHandler(meta).ServeHTTP(w, r)
		}))
	}
	mux.Handle(resourceMetaPath, serve(""))
	mux.Handle(resourceMetaPath+mcpPath, serve(mcpPath))
}

// resourceBases are the URLs the hub is reached at, as it was told:
// api.public_url, or the address it listens on when that is unset. Never
// a request's Host: a token the issuer minted for another service on
// this machine must not be taken because its client named that service's
// address in the Host header.
func (f *operator) resourceBases() []string {
	if b := f.publicURLs(); len(b) > 0 {
		return b
	}
	if f.opts.ListenURL != nil {
		if u := strings.TrimSuffix(f.opts.ListenURL(), "/"); u != "" {
			return []string{u}
		}
	}
	return nil
}

// setPublicURLs takes the revision's api.public_url.
func (f *operator) setPublicURLs(urls []string) { f.public.Store(&urls) }

// publicURLs are the URLs the company says the hub is reached at.
func (f *operator) publicURLs() []string {
	if p := f.public.Load(); p != nil {
		return *p
	}
	return nil
}

// resourceBase is the configured URL the request reached, when its scheme
// and Host name one; else the first configured. The request only chooses
// among configured URLs, so nothing it writes is echoed.
func (f *operator) resourceBase(r *http.Request) string {
	bases := f.resourceBases()
	if len(bases) == 0 {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	for _, b := range bases {
		if u, err := url.Parse(b); err == nil && u.Scheme == scheme && strings.EqualFold(u.Host, r.Host) {
			return b
		}
	}
	return bases[0]
}

// resourceURLs are the URLs a token presented here may have been issued
// for: each configured base's catalogue (what MCP clients ask for) and
// the base itself.
func (f *operator) resourceURLs() []string {
	var out []string
	for _, b := range f.resourceBases() {
		out = append(out, b+mcpPath, b)
	}
	return out
}

// resourceMetadataURL is the metadata document that describes what the
// request reached, or nothing when the hub knows no URL of its own.
func (f *operator) resourceMetadataURL(r *http.Request) string {
	base := f.resourceBase(r)
	if base == "" {
		return ""
	}
	if r.URL.Path == mcpPath {
		return base + resourceMetaPath + mcpPath
	}
	return base + resourceMetaPath
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
