package screen

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/crewlet/hub/hub/grants"
)

// Authorizing a remote server for a seat (issue 26): the server's page
// lists each seat of an auth: oauth server with where its grant stands and
// a button that sends the administrator to the server's authorization
// server; its answer comes back to the callback here. The state parameter
// names an authorization the hub started for this session and seat, and
// is bound to the signed-in session and to a nonce cookie of the browser
// that started it, so an answer brought back by anybody else, or replayed,
// grants nothing.

// Grants is the hub's credential minter as the screen uses it.
type Grants interface {
	// SeatGrants lists the seats that take a grant for server, each with
	// where its grant stands.
	SeatGrants(server string) []SeatGrant
	// Begin starts an authorization of server for seat, whose answer
	// comes back to redirect; binding is handed back to Complete's check.
	Begin(ctx context.Context, server, seat, redirect, binding string) (authURL string, err error)
	// Complete takes the answer brought back to the callback.
	Complete(ctx context.Context, a grants.Answer, check func(binding string) error) (server, seat string, err error)
}

// SeatGrant is one seat's grant for a server, as the server's page shows it.
type SeatGrant struct {
	Seat, State, Reason string
}

// grantCookie prefixes the cookies that hold the nonce of the browser
// that started an authorization, one per authorization. Lax, not Strict
// like the session's: the answer comes back by a navigation from the
// authorization server's site, which a Strict cookie would not be sent
// with.
const grantCookie = "crewlet_grant_"

// grantCookieName names the nonce cookie of the authorization whose state
// is state, by a digest of it: each authorization a browser started keeps
// its own, so two started in two tabs do not overwrite each other, and an
// answer clears its own alone (issue 36, finding 10).
func grantCookieName(state string) string {
	sum := sha256.Sum256([]byte("crewlet grant cookie\x00" + state))
	return grantCookie + hex.EncodeToString(sum[:12])
}

// grantBinding ties an authorization to a session and a nonce, by digest:
// neither is kept in the clear with the pending authorization.
func grantBinding(session, nonce string) string {
	sum := sha256.Sum256([]byte("crewlet grant binding\x00" + session + "\x00" + nonce))
	return session + "\x00" + hex.EncodeToString(sum[:])
}

func callbackURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + Base + "/oauth/callback"
}

// serveAuthorize starts authorizing a server for a seat and sends the
// administrator to the authorization server.
func (s *Screen) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	if s.opts.Grants == nil {
		http.NotFound(w, r)
		return
	}
	// A link, not a form: the screen's pages allow forms to post to the
	// hub alone, and the authorization server is elsewhere. The link
	// carries the session's CSRF token, so only the screen's own page,
	// drawn for this session, can start one.
	if !hmac.Equal([]byte(r.URL.Query().Get("csrf")), []byte(viewerOf(r).CSRF)) {
		s.opts.Refused(r, "csrf token missing or wrong")
		http.Error(w, "Forbidden: this link does not carry this session's CSRF token, so it may not come from this screen.", http.StatusForbidden)
		return
	}
	server, seat := r.PathValue("name"), r.URL.Query().Get("seat")
	id, _ := sessionOf(r)
	nonce := newSessionID()
	to, err := s.opts.Grants.Begin(r.Context(), server, seat, callbackURL(r), grantBinding(id, nonce))
	if err != nil {
		s.opts.Logger.Warn("oauth_authorize_unstarted", "server", server, "seat", seat, "error", err.Error())
		s.render(w, r, http.StatusBadGateway, page{Title: "Authorization not started", Viewer: viewerOf(r), Body: "grant-result",
			Data: grantResult{Server: server, Seat: seat, Error: err.Error()}})
		return
	}
	u, err := url.Parse(to)
	if err != nil || u.Query().Get("state") == "" {
		// Begin writes the address itself; one without its state could
		// never be answered here.
		s.opts.Logger.Error("oauth_authorize_unstarted", "server", server, "seat", seat, "error", "the authorization address names no state")
		s.render(w, r, http.StatusInternalServerError, page{Title: "Authorization not started", Viewer: viewerOf(r), Body: "grant-result",
			Data: grantResult{Server: server, Seat: seat, Error: "The hub could not start the authorization; its log says why."}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: grantCookieName(u.Query().Get("state")), Value: nonce, Path: Base + "/oauth/", MaxAge: int((10 * time.Minute) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

type grantResult struct {
	Server, Seat, Error string
}

// serveCallback takes the authorization server's answer. It completes
// only for the person who started the authorization: the request must
// carry that person's screen session and the nonce cookie of that very
// authorization (by its state). The session cookie is Strict, so a
// browser sent back from another site does not send it: that navigation
// is answered a page whose form brings the answer back from the screen
// itself, which does. An answer naming no state, or one no authorization
// here started, leaves every other authorization's cookie alone.
func (s *Screen) serveCallback(w http.ResponseWriter, r *http.Request) {
	if s.opts.Grants == nil {
		http.NotFound(w, r)
		return
	}
	var a grants.Answer
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		a = grants.Answer{State: r.PostFormValue("state"), Code: r.PostFormValue("code"),
			Error: r.PostFormValue("error"), Description: r.PostFormValue("error_description")}
	} else {
		q := r.URL.Query()
		a = grants.Answer{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), Description: q.Get("error_description")}
	}
	if a.State == "" {
		s.opts.Refused(r, "oauth callback without state")
		s.render(w, r, http.StatusBadRequest, page{Title: "Authorization not completed", Body: "grant-result",
			Data: grantResult{Error: "This answer names no authorization the hub started; start it again from the server's page."}})
		return
	}
	id, had := sessionOf(r)
	if !had {
		if r.Method == http.MethodGet {
			s.render(w, r, http.StatusOK, page{Title: "Finish the authorization", Body: "grant-finish", Data: a})
			return
		}
		s.opts.Refused(r, "oauth callback without a session")
		s.render(w, r, http.StatusUnauthorized, page{Title: "Authorization not completed", Body: "grant-result",
			Data: grantResult{Error: "Sign in to the screen as the person who started this authorization, then start it again from the server's page."}})
		return
	}
	cookie := grantCookieName(a.State)
	nonce := ""
	if c, err := r.Cookie(cookie); err == nil {
		nonce = c.Value
	}
	passed := false
	check := func(binding string) error {
		session, _, ok := cutBinding(binding)
		if !ok || nonce == "" || !hmac.Equal([]byte(binding), []byte(grantBinding(session, nonce))) {
			return errors.New("this answer was not brought back by the browser that started the authorization")
		}
		if !hmac.Equal([]byte(session), []byte(id)) {
			return errors.New("this answer belongs to another sign-in than this browser's; the person who started the authorization must finish it")
		}
		if _, ok := s.current(r.Context(), session); !ok {
			return errors.New("the session that started the authorization has ended; sign in and start it again")
		}
		passed = true
		return nil
	}
	server, seat, err := s.opts.Grants.Complete(r.Context(), a, check)
	if passed {
		// This authorization is answered: its nonce is spent, and no
		// other's is touched.
		http.SetCookie(w, &http.Cookie{Name: cookie, Value: "", Path: Base + "/oauth/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	}
	if err != nil {
		s.opts.Refused(r, "oauth callback refused")
		status := http.StatusBadRequest
		if a.Error != "" {
			status = http.StatusOK
		}
		s.render(w, r, status, page{Title: "Authorization not completed", Body: "grant-result",
			Data: grantResult{Server: server, Seat: seat, Error: err.Error()}})
		return
	}
	http.Redirect(w, r, Base+"/servers/"+url.PathEscape(server)+"?granted="+url.QueryEscape(seat), http.StatusSeeOther)
}

func cutBinding(b string) (session, digest string, ok bool) {
	for i := 0; i < len(b); i++ {
		if b[i] == 0 {
			return b[:i], b[i+1:], true
		}
	}
	return "", "", false
}

func (s *Screen) seatGrants(server string) []SeatGrant {
	if s.opts.Grants == nil {
		return nil
	}
	return s.opts.Grants.SeatGrants(server)
}
