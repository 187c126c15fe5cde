package screen

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/crewlet/hub/authority"
)

// maxFormBytes bounds what a form sent to the screen may weigh.
const maxFormBytes = 256 << 10

// cookieName holds the operator token, base64url-encoded so any token
// survives as a cookie value.
const cookieName = "crewlet_operator"

// viewer is who is signed in on this request.
type viewer struct {
	authority.Principal
	// CSRF is the token every state-changing request of this session
	// carries: derived from the operator token, never the token.
	CSRF string
}

// Name says who is signed in, by credential and seat, never by token.
func (v *viewer) Name() string {
	if v.Seat != "" {
		return v.Seat + " (credential " + v.TokenID + ")"
	}
	return "credential " + v.TokenID
}

type viewerKey struct{}

func viewerOf(r *http.Request) *viewer {
	v, _ := r.Context().Value(viewerKey{}).(*viewer)
	return v
}

func (s *Screen) csrfFor(token string) string {
	m := hmac.New(sha256.New, s.csrfKey[:])
	m.Write([]byte("crewlet screen csrf\x00"))
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// tokenOf reads the session's operator token from its cookie.
func tokenOf(r *http.Request) (string, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) == 0 {
		return "", true
	}
	return string(b), true
}

// wantsPage says whether a refused request is a person navigating, who is
// sent to sign in, rather than the script or a stream, which is told 401.
func wantsPage(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Get("live") != "1" &&
		!strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/secret-names")
}

// session serves next to a signed-in viewer whose token is current now,
// and, for a request that changes something, whose CSRF token matches;
// admin pages to administrators only.
func (s *Screen) session(next http.HandlerFunc, admin bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, had := tokenOf(r)
		p, ok := s.opts.Backend.Verify(tok)
		if tok == "" || !ok {
			if had {
				// The token was revoked, or the cookie was never one:
				// the session ends here.
				s.opts.Refused(r, "session token unknown or revoked")
				clearCookie(w, r)
			}
			if wantsPage(r) {
				to := Base + "/sign-in"
				if had {
					to += "?ended=1"
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			http.Error(w, "Unauthorized: sign in again; this session's token is not a current operator credential.", http.StatusUnauthorized)
			return
		}
		v := &viewer{Principal: p, CSRF: s.csrfFor(tok)}
		if r.Method != http.MethodGet {
			// A form of the screen is a few KiB; nothing larger is read.
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			sent := r.Header.Get("X-CSRF-Token")
			if sent == "" {
				sent = r.PostFormValue("csrf")
			}
			if !hmac.Equal([]byte(sent), []byte(v.CSRF)) {
				s.opts.Refused(r, "csrf token missing or wrong")
				http.Error(w, "Forbidden: this request does not carry this session's CSRF token, so it may not come from this screen.", http.StatusForbidden)
				return
			}
		}
		if admin && !p.Admin {
			s.render(w, r, http.StatusForbidden, page{Title: "For administrators", Viewer: v, Body: "forbidden"})
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	}
}

// changing refuses a state-changing request that a browser says came
// from another origin (Sec-Fetch-Site, else Origin against Host); a page
// on another port of the same machine is another origin, though the same
// site, so SameSite alone would let it through.
func (s *Screen) changing(next http.HandlerFunc) http.HandlerFunc {
	return s.origin.Handler(next).ServeHTTP
}

func (s *Screen) crossOrigin(w http.ResponseWriter, r *http.Request) {
	s.opts.Refused(r, "cross-origin request")
	http.Error(w, "Forbidden: this request came from a page of another origin; the screen takes changes only from its own pages.", http.StatusForbidden)
}

func setCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(token)), Path: Base,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Base, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

type signIn struct {
	Error, Note string
}

func (s *Screen) serveSignInPage(w http.ResponseWriter, r *http.Request) {
	if tok, _ := tokenOf(r); tok != "" {
		if _, ok := s.opts.Backend.Verify(tok); ok {
			http.Redirect(w, r, Base, http.StatusSeeOther)
			return
		}
	}
	var d signIn
	switch {
	case r.URL.Query().Get("ended") == "1":
		d.Note = "Your session ended: its token is no longer a current operator credential. Sign in with a current one."
	case r.URL.Query().Get("out") == "1":
		d.Note = "You are signed out."
	}
	s.render(w, r, http.StatusOK, page{Title: "Sign in", Body: "signin", Data: d})
}

// serveSignIn takes the token from the form's body (never the URL) and
// keeps it in the session cookie. A wrong token is answered 401 and sets
// nothing.
func (s *Screen) serveSignIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if _, ok := s.opts.Backend.Verify(tok); tok == "" || !ok {
		s.opts.Refused(r, "unknown or revoked token")
		s.render(w, r, http.StatusUnauthorized, page{Title: "Sign in", Body: "signin",
			Data: signIn{Error: "That is not a current operator token. Check it and try again."}})
		return
	}
	setCookie(w, r, tok)
	http.Redirect(w, r, Base, http.StatusSeeOther)
}

func (s *Screen) serveSignOut(w http.ResponseWriter, r *http.Request) {
	clearCookie(w, r)
	http.Redirect(w, r, Base+"/sign-in?out=1", http.StatusSeeOther)
}
