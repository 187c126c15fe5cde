package hub

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/oauth"
	"github.com/crewlet/hub/hub/throttle"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// guard is the DNS-rebinding protection: a page on another site that
// resolves its own name to 127.0.0.1 must not reach the hub through a
// visitor's browser. The Host must be a loopback name or an allowed host,
// and an Origin, when a browser sends one, a loopback or allowed origin.
func (f *operator) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.guarded(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// guarded applies guard to one request: false once it has refused it.
func (f *operator) guarded(w http.ResponseWriter, r *http.Request) bool {
	// Neither the log nor the answer repeats the refused value: it is
	// the stranger's to choose, and can be most of a megabyte.
	if !f.hostAllowed(r.Host) {
		f.refusals.note(slog.LevelWarn, "operator_request_refused", "host not allowed",
			"host_bytes", len(r.Host), "path", clip(r.URL.Path), "remote", r.RemoteAddr)
		http.Error(w, "Forbidden: this hub does not answer to the Host this request names; reach it by a loopback address or a name it was told to allow.", http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !f.originAllowed(o) {
		f.refusals.note(slog.LevelWarn, "operator_request_refused", "origin not allowed",
			"origin_bytes", len(o), "path", clip(r.URL.Path), "remote", r.RemoteAddr)
		http.Error(w, "Forbidden: this hub does not answer to pages of the Origin this request comes from; only loopback and allowed origins may call it.", http.StatusForbidden)
		return false
	}
	return true
}

func (f *operator) hostAllowed(host string) bool {
	if isLoopbackHost(host) {
		return true
	}
	for _, a := range f.opts.AllowedHosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, hostOnly(host)) {
			return true
		}
	}
	// The URLs the company says the hub is reached at name it too.
	for _, b := range f.publicURLs() {
		if u, err := url.Parse(b); err == nil && strings.EqualFold(u.Host, host) {
			return true
		}
	}
	return false
}

func (f *operator) originAllowed(origin string) bool {
	for _, a := range f.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(origin, "/")) {
			return true
		}
	}
	for _, b := range f.publicURLs() {
		if u, err := url.Parse(b); err == nil && strings.EqualFold(u.Scheme+"://"+u.Host, strings.TrimSuffix(origin, "/")) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopbackHost(u.Host)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func isLoopbackHost(hostport string) bool {
	h := hostOnly(hostport)
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// authenticate decides the request by its own bearer token (OPS-1): a
// static token of the company file or an access token of its identity
// provider, one chain (verifyBearer). A token revoked, or expired, while a
// client's session is open fails here on that client's very next request;
// a session id is never accepted in place of a credential.
func (f *operator) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, served := f.authenticated(w, r)
		if r == nil {
			return
		}
		defer served()
		next.ServeHTTP(w, r)
	})
}

// authenticated applies authenticate to one request: the request carrying
// its principal, and served, to call once it is answered (its credential's
// requests in service are capped, caps.go); or nil once it has refused it.
func (f *operator) authenticated(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	fields := strings.Fields(r.Header.Get("Authorization"))
	ref := &oauth.Refusal{Status: http.StatusUnauthorized, Reason: "no bearer token"}
	if len(fields) == 2 && strings.EqualFold(fields[0], "bearer") {
		// The credential is read first, always: one that verifies is
		// never refused by the throttle, whatever else came from its
		// address (issue 36 finding 2).
		p, refused := f.verifyBearer(r.Context(), r, fields[1])
		if refused == nil {
			served, ok := f.servingRequest(w, p)
			if !ok {
				return nil, nil
			}
			return r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)), served
		}
		// A credential that is no credential counts; one that is
		// good but not enough (a scope), or a provider that cannot
		// be asked, is no guess.
		if refused.Status == http.StatusUnauthorized {
			if wait, over := f.wrong.Failed(throttle.Source(r), authority.Digest(fields[1])); over {
				f.refusals.note(slog.LevelInfo, "operator_auth_refused", "too many wrong credentials from this address", "path", clip(r.URL.Path), "remote", r.RemoteAddr, "status", http.StatusTooManyRequests)
				throttle.RefuseWrong(w, refused.Reason, wait)
				return nil, nil
			}
		}
		ref = refused
	}
	// The presented token is never logged, not even in part; the
	// refusals are sampled, since anyone can send them.
	f.refuseBearer(w, r, ref)
	return nil, nil
}

// maxTokenInfos bounds the SDK's views of principals kept.
const maxTokenInfos = 1024

// sdkAuth hands the principal authenticate found to the SDK, which passes
// it to tool handlers with each request and pins a stateful session to the
// credential's login.
func (f *operator) sdkAuth(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := principalFrom(r.Context())
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		if toks, ok := r.Context().Value(spelledTokensKey{}).([]spelledToken); ok {
			// The request's own progress tokens as written (route): a
			// TokenInfo of its own, never the credential's shared one.
			return &auth.TokenInfo{UserID: p.Caller().Seat, Extra: map[string]any{principalKey: p, spelledTokensExtra: toks}}, nil
		}
		if ti, ok := f.tokenInfos.Load(p); ok {
			return ti.(*auth.TokenInfo), nil
		}
		ti := &auth.TokenInfo{UserID: p.Caller().Seat, Extra: map[string]any{principalKey: p}}
		// Principals are the company's credentials, few; a revision that
		// replaced many starts the record again.
		if f.tokenCount.Add(1) > maxTokenInfos {
			f.tokenInfos.Clear()
			f.tokenCount.Store(0)
		}
		f.tokenInfos.Store(p, ti)
		return ti, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}

func (f *operator) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := principalFrom(r.Context()); !ok || !p.Admin {
			writeJSON(w, http.StatusForbidden, map[string]string{"class": string(authority.Forbidden), "error": "this route is for administrators"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
