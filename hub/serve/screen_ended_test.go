package serve

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/hub/screen"
)

// A screen request whose client went away while its session was read
// from the node's store (a page left, its event stream closed) is not an
// unreadable session: nothing is logged as an error, the session is not
// refused, and it still opens the screen afterwards (issue 40, item 6).
func TestScreenRequestEndedIsNoUnreadableSession(t *testing.T) {
	ctx := t.Context()
	log, logger := hubtest.NewLog(slog.LevelDebug)
	node, closeNode, err := openState(ctx, t.TempDir(), logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeNode()
	sessions, err := openScreenSessions(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	const token = "ada-screen-token-0123456789abcdef"
	env := hubtest.NewEnv(map[string]string{"ADA_TOKEN": token})
	h, err := hub.New(ctx, hub.Options{Company: hubtest.NewCompany().AdminToken("laptop", "ADA_TOKEN").Parse(t),
		Env: env.Lookup, Logger: logger, ScreenSessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(srv.URL+screen.Base+"/sign-in", url.Values{"token": {token}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %v %v", resp, err)
	}
	resp.Body.Close()
	base, _ := url.Parse(srv.URL + screen.Base)
	cookies := jar.Cookies(base)
	if len(cookies) != 1 {
		t.Fatalf("sign in set %d cookies", len(cookies))
	}

	ended, cancel := context.WithCancel(ctx)
	cancel()
	req := httptest.NewRequestWithContext(ended, http.MethodGet, screen.Base, nil)
	req.Host = base.Host
	req.AddCookie(cookies[0])
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, req)

	if lines := log.Lines(`"level":"ERROR"`); len(lines) > 0 {
		t.Errorf("a request that ended logged errors: %q", lines)
	}
	if lines := log.Lines("session token unknown or revoked"); len(lines) > 0 {
		t.Errorf("a request that ended was logged as a refused session: %q", lines)
	}
	if c := rec.Result().Cookies(); len(c) > 0 {
		t.Errorf("a request that ended cleared the session's cookie: %v", c)
	}
	resp, err = client.Get(srv.URL + screen.Base)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the session after a request that ended: %v %v", resp, err)
	}
	resp.Body.Close()
}
