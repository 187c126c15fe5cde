package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/oauth"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/hub/throttle"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The operator surface is what people and their own assistants reach: the
// operator catalogue over MCP (operator_mcp.go) and over /operator/act
// (act.go), the REST routes
// (rest_routes.go, config_edit.go), each behind the HTTP guard and the
// bearer check (http_guard.go), and what third-party servers offer beside
// tools, re-exported (reexport.go).

// control is what the operator surface asks of the hub: the revision in
// force, how to change it, and what its servers report. The surface holds
// no hub, only this.
type control interface {
	Company() *config.Company
	Apply(*config.Company) error
	Reload() error
	check(*config.Company) error
	serverRows() []serverRow
	seatCatalogues() []*Catalogue
	fleetView(ctx context.Context) fleetView
	// toolChanges lists the third-party tools held for a person's
	// review (issue 28).
	toolChanges() []toolpin.Change
}

// operatorDeps is everything the operator surface is given.
type operatorDeps struct {
	opts    *Options
	log     *slog.Logger
	company *Catalogue
	router  *Router
	tokens  *authority.Tokens
	// oauth checks the identity provider's access tokens, when the
	// company names one (operator_oauth.go).
	oauth   *oauth.Verifier
	control control
	// changes is what the screen watches: every server and catalogue
	// change is said there.
	changes *changeFeed
	// sessionKey signs the 2025 sessions' ids: the fleet's, or this
	// node's own alone (mcp_sessions_fleet.go).
	sessionKey []byte
}

// operator is the operator surface. It implements events, so supervision
// reports to it without knowing it.
type operator struct {
	operatorDeps

	refusals *refusalLog
	// wrong counts failed credentials per source and credential, for the
	// API (http_guard.go) and the screen's sign-in alike: one counter, so
	// alternating the two surfaces doubles no guesser's tries.
	wrong *throttle.Credentials
	// public is the revision's api.public_url (operator_oauth.go).
	public   atomic.Pointer[[]string]
	screen   *screen.Screen
	inflight atomic.Int64 // tools/call requests being answered
	putMu    sync.Mutex   // one company-file edit at a time
	mu       sync.Mutex
	synced   map[string]string // tool name -> sdkKey, as the SDK has it
	owned    *owners           // who owns each re-exported resource and prompt
	subs     map[string]int    // resource uri -> clients subscribed through the hub
	server   *mcp.Server
	// stateful and stateless are the SDK's handlers, behind sdkAuth.
	stateful  http.Handler
	stateless http.Handler
	// tokenInfos are the SDK's view of each principal, made once: the SDK
	// only reads them.
	tokenInfos sync.Map // authority.Principal -> *auth.TokenInfo
	tokenCount atomic.Int64
	// sessions are the 2025 sessions, as the fast path needs them;
	// sessionIDs mints and checks their ids.
	sessions   *sessionTable
	sessionIDs sessionIDs
	// caps are what each credential holds against api.limits (caps.go).
	caps caps
	// noFast leaves every call to the SDK: the path the fast path is
	// tested against. fastCalls counts the calls the fast path answered.
	noFast    atomic.Bool
	fastCalls atomic.Int64
	// impl is how the front names itself; serverInfo, its JSON.
	impl       *mcp.Implementation
	serverInfo []byte
}

var _ events = (*operator)(nil)

func (f *operator) toolsChanged() {
	f.syncTools()
	f.changes.changed()
}

func (f *operator) serverChanged() { f.changes.changed() }

func (f *operator) featuresChanged(server string, feats upstream.Features, inst func() *upstream.Instance) {
	f.mirrorFeatures(server, feats, inst)
}

func (f *operator) serverUp(server string, inst *upstream.Instance) { f.resubscribe(server, inst) }

// drainWait bounds how long close lets calls that were just cut answer
// before their sessions end.
const drainWait = 2 * time.Second

// close ends every open operator session. The hub has cut the calls in
// flight already; each is given a moment to answer that it was cut, so a
// session's client reads why rather than a stream that ended.
func (f *operator) close() {
	for deadline := time.Now().Add(drainWait); f.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	f.sessions.fleet.close()
	f.sessions.closeAll()
	for ss := range f.server.Sessions() {
		ss.Close()
	}
}

// Handler is the operator surface.
func (h *Hub) Handler() http.Handler {
	f := h.operator
	mux := http.NewServeMux()
	mux.Handle("/operator/mcp", mcpEndpoint{f})
	// The dashboard's transport to the same catalogue (OPS-2).
	mux.Handle("POST /operator/act", f.guard(f.authenticate(http.HandlerFunc(f.serveAct))))
	mux.Handle("GET /tools", f.guard(f.authenticate(http.HandlerFunc(f.serveTools))))
	mux.Handle("POST /config/reload", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveReload)))))
	// Server rows show each configured launch, so they are for
	// administrators, as the configuration itself is.
	mux.Handle("GET /mcp-servers", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveMCPServers)))))
	mux.Handle("GET /mcp-servers/{name}", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveMCPServer)))))
	mux.Handle("GET /fleet", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveFleet)))))
	mux.Handle("PUT /config/mcp-servers/{name}", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.servePutMCPServer)))))
	mux.Handle("GET /debug/runtime", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveRuntime)))))
	mux.Handle("GET /artifacts/{id}/{path...}", f.guard(f.authenticate(http.HandlerFunc(f.serveArtifact))))
	// The dashboard's trash, and a person's decisions about an artifact.
	f.registerTrash(mux)
	// Where an MCP client finds the identity provider to sign in with.
	f.registerOAuth(mux)
	if f.opts.Metrics != nil {
		mux.Handle("GET /metrics", f.guard(f.authenticate(f.opts.Metrics)))
	}
	// Settings › MCP Tools, for people in a browser; / leads there.
	f.screen.Register(mux, f.guard)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","version":%q}`+"\n", Version)
	})
	return mux
}
