// Package screen is Settings › MCP Tools in a browser, served by the hub
// itself: the MCP servers with one cell per node, the catalogue grouped by
// source with what each tool's hints assert, a page per server, the form
// that adds a server, and live updates as servers and catalogues change.
//
// Pages are rendered on the server from html/template; a little script
// (embedded, like the styles) adds live updates, the form's submission
// without a reload and the secret names offered as you type $. Everything
// works without it but the live part.
//
// Sign-in takes an operator token once and keeps it in an HttpOnly,
// SameSite=Strict cookie scoped to the screen's path: never in a URL or a
// page. Every request reads the token from the cookie and asks the hub
// whether it is still current, so a revoked token ends the session at its
// next request (an open event stream is told at the next change). Every
// state-changing request must come from the screen's own origin (Fetch
// metadata or Origin, net/http's CrossOriginProtection) and carry a CSRF
// token derived from the session's token, which the pages carry instead of
// the token itself.
//
// The screen holds no hub: it is given a Backend. Its event streams end
// when Options.Done closes; it starts no goroutine of its own beyond the
// request it serves.
package screen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/throttle"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/hub/toolscan"
)

// Base is where the screen lives.
const Base = "/settings/mcp-tools"

// Backend is what the screen reads and asks of the hub.
type Backend interface {
	// Verify reads an operator token: whose it is, and whether it is
	// current.
	Verify(token string) (authority.Principal, bool)
	// Current answers whose the token with this id and digest is, while
	// it is still held: what a session, which keeps no token, is checked
	// against at every request.
	Current(tokenID string, digest [sha256.Size]byte) (authority.Principal, bool)
	// Servers reads every server the revision in force declares.
	Servers() []Server
	// Tools reads the catalogue: the company's tools and the tools of
	// every seat's own children.
	Tools() []Tool
	// SecretNames lists the secret store's names, never a value.
	SecretNames() []string
	// AddServer adds a server to the company file as PUT
	// /config/mcp-servers/{name} does; with write false it only checks.
	// A server written is answered in its first state on this node
	// (started, failing and why, not started and why), waited for until
	// then or until ctx ends: the form must never say "added" of a server
	// the table above is about to show failing.
	AddServer(ctx context.Context, entry config.MCPServer, write bool) AddResult
	// HeldTools lists the third-party tools held until a person approves
	// them, as list_tool_changes does.
	HeldTools() []toolpin.Change
	// DecideTools approves or rejects held tools as p, through
	// decide_tool_change: refused, recorded and attributed as there.
	DecideTools(ctx context.Context, p authority.Principal, d ToolDecision) DecideResult
	// Changes is the number of changes so far and a channel closed at the
	// next one.
	Changes() (uint64, <-chan struct{})
}

// AddResult is what adding a server answered.
type AddResult struct {
	// Status is the HTTP status the write answered (201 when added).
	Status     int
	Class      string
	Error      string
	Violations []string
	// Entry is the new entry's path in the company (mcp_servers[N]), which
	// the violations about it begin with; the form names its own fields
	// instead (formViolations).
	Entry string
	// Server is the added server's row once its first start on this node
	// is over (or when the wait ran out); nil when nothing was written.
	Server *Server
}

// Options configure a Screen.
type Options struct {
	Backend Backend
	// Done ends every open event stream (the hub closing).
	Done <-chan struct{}
	// Refused is told of every refused sign-in or session, for the
	// hub's sampled refusal log; never of the token.
	Refused func(r *http.Request, reason string)
	Logger  *slog.Logger
	// Sessions keeps the sign-ins; nil keeps them in this process.
	Sessions Sessions
	// Wrong counts the sign-in's wrong tokens per source and token. The
	// hub gives the very counter its API uses (one counter for both
	// surfaces), so a guesser cannot double their tries by alternating
	// the API and the screen. Nil: the screen's own.
	Wrong *throttle.Credentials
	// Grants is the credential minter for servers that take a grant per
	// seat (auth: oauth); nil offers no authorization.
	Grants Grants
}

// Screen serves the pages.
type Screen struct {
	opts   Options
	pages  *template.Template
	origin *http.CrossOriginProtection
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New builds the screen.
func New(opts Options) *Screen {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Refused == nil {
		opts.Refused = func(*http.Request, string) {}
	}
	if opts.Sessions == nil {
		opts.Sessions = newMemorySessions()
	}
	if opts.Wrong == nil {
		opts.Wrong = throttle.NewCredentials(nil)
	}
	s := &Screen{opts: opts, origin: http.NewCrossOriginProtection()}
	s.origin.SetDenyHandler(http.HandlerFunc(s.crossOrigin))
	s.pages = template.Must(template.New("").Funcs(template.FuncMap{
		"asserts":    Asserts,
		"reaches":    Reaches,
		"stateClass": stateClass,
		"cell":       func(s Server, node string) Cell { return s.CellOn(node) },
		"pairOf":     pairOf,
		"pairsOf":    pairsOf,
		"toolCount":  toolCount,
		// A character a browser would not show is written as its code
		// point, as the scanner defines them, so a person sees what a
		// model would read.
		"visible": toolscan.Show,
		// A tool's name with every character outside printable ASCII
		// written as its code point (issue 36): a name that renders as
		// another shows how it differs.
		"showName": toolscan.ShowName,
	}).ParseFS(templateFS, "templates/*.html"))
	return s
}

// toolCount says how many tools, in words.
func toolCount(n int) string {
	if n == 1 {
		return "1 tool"
	}
	return strconv.Itoa(n) + " tools"
}

// Register puts the screen's routes on mux, each behind wrap (the hub's
// Host and Origin guard).
func (s *Screen) Register(mux *http.ServeMux, wrap func(http.Handler) http.Handler) {
	h := func(pattern string, f http.HandlerFunc) { mux.Handle(pattern, wrap(secured(f))) }
	h("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, Base, http.StatusSeeOther) })
	h("GET "+Base, s.session(s.serveTools, false))
	h("GET "+Base+"/servers/{name}", s.session(s.serveServer, true))
	h("POST "+Base+"/servers", s.changing(s.session(s.serveAdd, true)))
	h("GET "+Base+"/tool-changes", s.session(s.serveChanges, false))
	h("POST "+Base+"/tool-changes", s.changing(s.session(s.serveDecide, true)))
	h("GET "+Base+"/secret-names", s.session(s.serveSecretNames, true))
	h("GET "+Base+"/servers/{name}/authorize", s.session(s.serveAuthorize, true))
	h("GET "+Base+"/oauth/callback", s.serveCallback)
	h("POST "+Base+"/oauth/callback", s.changing(s.serveCallback))
	h("GET "+Base+"/events", s.session(s.serveEvents, false))
	h("GET "+Base+"/sign-in", s.serveSignInPage)
	h("POST "+Base+"/sign-in", s.changing(s.serveSignIn))
	h("POST "+Base+"/sign-out", s.changing(s.session(s.serveSignOut, false)))
	assets, _ := fs.Sub(assetFS, "assets")
	files := http.StripPrefix(Base+"/assets/", http.FileServerFS(assets))
	h("GET "+Base+"/assets/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// secured sets what every answer of the screen carries: scripts and
// styles from the hub alone, no framing, no referrer, no caching of pages
// that show a company's configuration.
func secured(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		// Not no-referrer: under it a browser sends Origin: null with a
		// form's POST, and the hub's guard refuses an origin it cannot
		// read. same-origin keeps the address off every other site.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next(w, r)
	}
}

// page is what every page's layout reads.
type page struct {
	Title  string
	Viewer *viewer
	// Body names the template of the page's main content.
	Body string
	Data any
}

// render writes a page whole, or only its live region when the script
// asks for it (?live=1) to swap in after a change.
func (s *Screen) render(w http.ResponseWriter, r *http.Request, status int, p page) {
	name := "layout"
	if r.URL.Query().Get("live") == "1" {
		name = p.Body + "-live"
	}
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name, p); err != nil {
		s.opts.Logger.Error("screen_render_failed", "page", p.Body, "error", err.Error())
		http.Error(w, "The page could not be drawn; the hub's log says why.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
