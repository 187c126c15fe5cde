package screen

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/throttle"
)

// maxFormBytes bounds what a form sent to the screen may weigh.
const maxFormBytes = 256 << 10

// cookieName holds the session id: never the token, which the hub does
// not keep either.
const cookieName = "crewlet_session"

// viewer is who is signed in on this request.
type viewer struct {
	authority.Principal
	// CSRF is the token every state-changing request of this session
	// carries: derived from the session id, never the operator token.
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

// csrfFor derives a session's CSRF token from its id alone, keyed by the
// id: the id is the secret (the store keeps only its digest), so the token
// needs no key of the process's own. A key drawn per process made every
// page drawn before a restart, or on another node of a fleet, answer 403
// (issue 36); the token is now as durable and as fleet-wide as the
// session it belongs to, and, one-way from the id, reveals nothing of it.
func csrfFor(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("crewlet screen csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionOf reads the session id from the request's cookie; had says a
// cookie was sent at all.
func sessionOf(r *http.Request) (id string, had bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return "", false
	}
	return c.Value, true
}

// current answers who a session stands for, if it is held and the
// credential that opened it is still current; a session whose credential
// was revoked or replaced is forgotten here. A read cut short because the
// request ended (its page navigated away, its stream was closed) answers
// no session too, but is no fault of the store: callers see ctx.Err() and
// answer nobody, and nothing is logged.
func (s *Screen) current(ctx context.Context, id string) (authority.Principal, bool) {
	if id == "" {
		return authority.Principal{}, false
	}
	key := sessionKey(id)
	b, err := s.opts.Sessions.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, ErrNoSession) && ctx.Err() == nil {
			s.opts.Logger.Error("screen_session_unreadable", "error", err.Error())
		}
		return authority.Principal{}, false
	}
	rec, ok := decodeRecord(b)
	var digest [sha256.Size]byte
	if d, err := hex.DecodeString(rec.Digest); ok && err == nil && len(d) == sha256.Size {
		copy(digest[:], d)
		if p, ok := s.opts.Backend.Current(rec.TokenID, digest); ok {
			return p, true
		}
	}
	if err := s.opts.Sessions.Delete(ctx, key); err != nil && ctx.Err() == nil {
		s.opts.Logger.Error("screen_session_unforgotten", "error", err.Error())
	}
	return authority.Principal{}, false
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
		id, had := sessionOf(r)
		p, ok := s.current(r.Context(), id)
		if !ok && r.Context().Err() != nil {
			// The request ended before its session was read: nobody is
			// waiting for an answer, and the session was not refused.
			return
		}
		if !ok {
			if had {
				// The session was signed out, expired or its token
				// revoked, or the cookie was never one: it ends here.
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
		v := &viewer{Principal: p, CSRF: csrfFor(id)}
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

func setCookie(w http.ResponseWriter, r *http.Request, session string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: session, Path: Base, MaxAge: int(sessionTTL / time.Second),
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
	if id, _ := sessionOf(r); id != "" {
		if _, ok := s.current(r.Context(), id); ok {
			http.Redirect(w, r, Base, http.StatusSeeOther)
			return
		}
	}
	var d signIn
	switch {
	case r.URL.Query().Get("ended") == "1":
		d.Note = "Your session ended: it was signed out, it expired, or its token is no longer a current operator credential. Sign in with a current one."
	case r.URL.Query().Get("out") == "1":
		d.Note = "You are signed out."
	}
	s.render(w, r, http.StatusOK, page{Title: "Sign in", Body: "signin", Data: d})
}

// serveSignIn takes the token from the form's body (never the URL), and
// opens a session for it: the cookie carries the session's id, the hub
// keeps which credential opened it. The token is always read and checked
// first, and one that verifies signs in whatever else came from its
// address: only a wrong one is counted, per source and token digest with a
// ceiling per source, and answered 401, or 429 once past either, with how
// long to wait. A neighbour on the same address (or behind one proxy) who
// keeps sending a stale token so slows only that token, never a person
// with the right one.
func (s *Screen) serveSignIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	p, ok := s.opts.Backend.Verify(tok)
	if tok == "" || !ok {
		if wait, over := s.opts.Wrong.Failed(throttle.Source(r), authority.Digest(tok)); over {
			s.opts.Refused(r, "too many wrong tokens from this address")
			secs := int(wait/time.Second) + 1
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			s.render(w, r, http.StatusTooManyRequests, page{Title: "Sign in", Body: "signin",
				Data: signIn{Error: fmt.Sprintf("That is not a current operator token, and too many wrong tokens came from this address: check it, then wait %d s before the next try. A right token is never slowed.", secs)}})
			return
		}
		s.opts.Refused(r, "unknown or revoked token")
		s.render(w, r, http.StatusUnauthorized, page{Title: "Sign in", Body: "signin",
			Data: signIn{Error: "That is not a current operator token. Check it and try again."}})
		return
	}
	id := newSessionID()
	digest := authority.Digest(tok)
	rec := sessionRecord{TokenID: p.TokenID, Digest: hex.EncodeToString(digest[:]), Created: time.Now().UTC()}
	if err := s.opts.Sessions.Put(r.Context(), sessionKey(id), encodeRecord(rec), sessionTTL); err != nil {
		s.opts.Logger.Error("screen_session_unkept", "error", err.Error())
		http.Error(w, "The hub could not keep your session; its log says why. Try again.", http.StatusServiceUnavailable)
		return
	}
	setCookie(w, r, id)
	http.Redirect(w, r, Base, http.StatusSeeOther)
}

// serveSignOut ends the session where it is kept, so its cookie, kept or
// copied, opens nothing after.
func (s *Screen) serveSignOut(w http.ResponseWriter, r *http.Request) {
	if id, _ := sessionOf(r); id != "" {
		if err := s.opts.Sessions.Delete(r.Context(), sessionKey(id)); err != nil {
			s.opts.Logger.Error("screen_session_unforgotten", "error", err.Error())
			http.Error(w, "The hub could not end your session; its log says why. Try again.", http.StatusServiceUnavailable)
			return
		}
	}
	clearCookie(w, r)
	http.Redirect(w, r, Base+"/sign-in?out=1", http.StatusSeeOther)
}
