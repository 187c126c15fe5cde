//lint:file-ignore SA1019 a hub forwards logging and sampling (deprecated in 2026-07-28, SEP-2577) for clients and servers of the session revisions, which still use them.

package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernProtocol is the first MCP revision without sessions. Requests of it
// are served by a stateless handler; older revisions by a stateful one.
const modernProtocol = "2026-07-28"

// front is the operator surface: the one operator catalogue over MCP, plus
// the REST routes.
type front struct {
	putMu     sync.Mutex // one company-file edit at a time
	mu        sync.Mutex
	synced    map[string]string // tool name -> sdkKey, as the SDK has it
	owned     *owners           // who owns each re-exported resource and prompt
	subs      map[string]int    // resource uri -> clients subscribed through the hub
	h         *Hub
	server    *mcp.Server
	stateful  *mcp.StreamableHTTPHandler
	stateless *mcp.StreamableHTTPHandler
}

func newFront(h *Hub) *front {
	f := &front{h: h, owned: newOwners(), subs: map[string]int{}}
	f.server = mcp.NewServer(&mcp.Implementation{Name: "crewlet", Title: "Crewlet hub", Version: Version}, &mcp.ServerOptions{
		Instructions: "The Crewlet hub's operator catalogue: the company's builtin tools and its MCP servers' tools, decided by your bearer token on every call.",
		Logger:       quiet(h.log).With("component", "operator_mcp"),
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return f.complete(ctx, req)
		},
		SubscribeHandler:   func(ctx context.Context, req *mcp.SubscribeRequest) error { return f.subscribe(ctx, req) },
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error { return f.unsubscribe(ctx, req) },
	})
	f.server.AddReceivingMiddleware(f.callMiddleware)
	f.syncTools()
	// Both revisions are served fully only by two handlers behind one route:
	// the SDK speaks 2026-07-28 only statelessly, and only a stateful
	// handler can push list_changed or forward server-to-client requests to
	// a 2025 client.
	get := func(*http.Request) *mcp.Server { return f.server }
	opts := func(stateless bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{
			Stateless:           stateless,
			Logger:              quiet(h.log).With("component", "operator_http"),
			MaxRequestBodyBytes: h.opts.MaxBodyBytes,
			// Host and Origin are checked by guard for every route,
			// including non-loopback listeners with allowed names.
			DisableLocalhostProtection: true,
		}
	}
	f.stateful = mcp.NewStreamableHTTPHandler(get, opts(false))
	f.stateless = mcp.NewStreamableHTTPHandler(get, opts(true))
	return f
}

// syncTools mirrors the catalogue into the SDK server, which is what lists
// tools to clients and pushes tools/list_changed when the set moves (MCP-8).
func (f *front) syncTools() {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := CompanyRegistry(f.h.company).Entries()
	now := map[string]string{}
	for _, e := range entries {
		key := sdkKey(e)
		now[e.Name] = key
		if f.synced[e.Name] == key {
			continue
		}
		f.server.AddTool(sdkTool(e), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Unreachable in practice: callMiddleware answers every
			// tools/call. Kept so the SDK never answers one by itself.
			return f.call(ctx, req), nil
		})
	}
	var gone []string
	for name := range f.synced {
		if _, ok := now[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		f.server.RemoveTools(gone...)
	}
	f.synced = now
}

// sdkKey identifies what a client would see of a tool, so an unchanged tool
// is not re-added (which would notify every client for nothing).
func sdkKey(e Entry) string {
	b, _ := json.Marshal(sdkTool(e))
	return string(b)
}

func sdkTool(e Entry) *mcp.Tool {
	t := &mcp.Tool{
		Name:        e.Name,
		Description: e.Description,
		InputSchema: json.RawMessage(e.InputSchema),
		Annotations: servers.Annotations(e.Hints),
		Meta: mcp.Meta{
			servers.MetaSource:   string(e.Source),
			servers.MetaHints:    e.Hints,
			servers.MetaDelivers: e.Delivers,
		},
	}
	if len(e.OutputSchema) > 0 {
		t.OutputSchema = json.RawMessage(e.OutputSchema)
	}
	return t
}

// callMiddleware answers every tools/call itself, so an unknown tool is a
// not_found refusal rather than the SDK's protocol error (REF-5), and so each
// call is decided by the credential of the request carrying it (OPS-1).
func (f *front) callMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		return f.call(ctx, ctr), nil
	}
}

func (f *front) call(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
	p, ok := principalOf(req.Extra)
	if !ok {
		// The HTTP layer refuses a request without a valid token before
		// the SDK sees it; this is the belt to that brace.
		return servers.Refused(authority.Refuse(authority.Forbidden, "This call carries no operator credential."))
	}
	var args json.RawMessage
	if req.Params != nil {
		args = req.Params.Arguments
	}
	// Log lines, progress and requests an upstream server sends while it
	// serves the call go back to this session.
	if req.Session != nil {
		ctx = upstream.WithDownstream(ctx, sessionDownstream{ss: req.Session, token: req.Params.GetProgressToken(), call: ctx})
	}
	return f.h.router.CallForPerson(ctx, CompanyRegistry(f.h.company), p.Caller(), req.Params.Name, args)
}

const principalKey = "crewlet/principal"

func principalOf(extra *mcp.RequestExtra) (authority.Principal, bool) {
	if extra == nil || extra.TokenInfo == nil {
		return authority.Principal{}, false
	}
	p, ok := extra.TokenInfo.Extra[principalKey].(authority.Principal)
	return p, ok
}

type ctxKey struct{}

func principalFrom(ctx context.Context) (authority.Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(authority.Principal)
	return p, ok
}

// Handler is the operator surface.
func (h *Hub) Handler() http.Handler {
	f := h.front
	mux := http.NewServeMux()
	mux.Handle("/operator/mcp", f.guard(f.authenticate(f.sdkAuth(http.HandlerFunc(f.serveMCP)))))
	mux.Handle("GET /tools", f.guard(f.authenticate(http.HandlerFunc(f.serveTools))))
	mux.Handle("POST /config/reload", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveReload)))))
	// Server rows show each configured launch, so they are for
	// administrators, as the configuration itself is.
	mux.Handle("GET /mcp-servers", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveMCPServers)))))
	mux.Handle("GET /mcp-servers/{name}", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.serveMCPServer)))))
	mux.Handle("PUT /config/mcp-servers/{name}", f.guard(f.authenticate(f.admin(http.HandlerFunc(f.servePutMCPServer)))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","version":%q}`+"\n", Version)
	})
	return mux
}

// guard is the DNS-rebinding protection: a page on another site that
// resolves its own name to 127.0.0.1 must not reach the hub through a
// visitor's browser. The Host must be a loopback name or an allowed host,
// and an Origin, when a browser sends one, a loopback or allowed origin.
func (f *front) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.hostAllowed(r.Host) {
			f.h.log.Warn("operator_request_refused", "reason", "host not allowed", "host", r.Host, "remote", r.RemoteAddr)
			http.Error(w, fmt.Sprintf("Forbidden: the Host %q is not one this hub answers to", r.Host), http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !f.originAllowed(o) {
			f.h.log.Warn("operator_request_refused", "reason", "origin not allowed", "origin", o, "remote", r.RemoteAddr)
			http.Error(w, fmt.Sprintf("Forbidden: the Origin %q is not one this hub answers to", o), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *front) hostAllowed(host string) bool {
	if isLoopbackHost(host) {
		return true
	}
	for _, a := range f.h.opts.AllowedHosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, hostOnly(host)) {
			return true
		}
	}
	return false
}

func (f *front) originAllowed(origin string) bool {
	for _, a := range f.h.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(origin, "/")) {
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

// authenticate decides the request by its own bearer token (OPS-1). A token
// revoked while a client's session is open fails here on that client's very
// next request; a session id is never accepted in place of a credential.
func (f *front) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fields := strings.Fields(r.Header.Get("Authorization"))
		reason := "no bearer token"
		if len(fields) == 2 && strings.EqualFold(fields[0], "bearer") {
			if p, ok := f.h.tokens.Verify(fields[1]); ok {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)))
				return
			}
			reason = "unknown or revoked token"
		}
		// The presented token is never logged, not even in part.
		f.h.log.Info("operator_auth_refused", "reason", reason, "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="crewlet"`)
		http.Error(w, "Unauthorized: "+reason, http.StatusUnauthorized)
	})
}

// sdkAuth hands the principal authenticate found to the SDK, which passes
// it to tool handlers with each request and pins a stateful session to the
// credential's login.
func (f *front) sdkAuth(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := principalFrom(r.Context())
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Caller().Seat, Extra: map[string]any{principalKey: p}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}

func (f *front) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := principalFrom(r.Context()); !ok || !p.Admin {
			writeJSON(w, http.StatusForbidden, map[string]string{"class": string(authority.Forbidden), "error": "this route is for administrators"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveMCP picks the handler for the request's protocol revision.
func (f *front) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		limit := f.h.opts.MaxBodyBytes
		if r.ContentLength > limit {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", limit), http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "could not read the request body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if modern(r.Header, body) {
			f.stateless.ServeHTTP(w, r)
			return
		}
	} else if v := r.Header.Get("Mcp-Protocol-Version"); v >= modernProtocol {
		f.stateless.ServeHTTP(w, r)
		return
	}
	f.stateful.ServeHTTP(w, r)
}

// modern reports whether a POST speaks 2026-07-28 or later: by its header,
// or, for a first request without one, by the revision in its _meta.
func modern(h http.Header, body []byte) bool {
	if v := h.Get("Mcp-Protocol-Version"); v != "" {
		return v >= modernProtocol
	}
	if h.Get("Mcp-Session-Id") != "" {
		return false
	}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v >= modernProtocol
}

// toolRow is one row of GET /tools (CAT-2).
type toolRow struct {
	Name        string        `json:"name"`
	Source      Source        `json:"source"`
	Description string        `json:"description"`
	Annotations servers.Hints `json:"annotations"`
	Delivers    string        `json:"delivers"`
	ArgCount    int           `json:"arg_count"`
}

func (f *front) serveTools(w http.ResponseWriter, r *http.Request) {
	entries := CompanyRegistry(f.h.company).Entries()
	rows := make([]toolRow, 0, len(entries))
	counts := map[Source]int{}
	for _, e := range entries {
		rows = append(rows, toolRow{Name: e.Name, Source: e.Source, Description: e.Description,
			Annotations: e.Hints, Delivers: e.Delivers, ArgCount: e.ArgCount()})
		counts[e.Source]++
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Source != rows[j].Source {
			return rows[i].Source < rows[j].Source
		}
		return rows[i].Name < rows[j].Name
	})
	writeJSON(w, http.StatusOK, map[string]any{"tools": rows, "sources": counts})
}

func (f *front) serveReload(w http.ResponseWriter, r *http.Request) {
	if err := f.h.Reload(); err != nil {
		f.h.log.Error("config_reload_failed", "error", err.Error())
		// Only a document the check refused is the caller's to fix; a store
		// or file that could not be read is the node's own fault (REF-4).
		var v config.Violations
		if errors.As(err, &v) {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"class": string(authority.Invalid), "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"class": string(authority.InternalError), "error": authority.InternalErrorSentence})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "applied"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// close ends every open operator session.
func (f *front) close() {
	for ss := range f.server.Sessions() {
		ss.Close()
	}
}

// quiet is the SDK's logger: it reports session comings and goings at info
// level, three lines for every stateless request, so below warnings it
// speaks only when the hub runs with debug logging.
func quiet(l *slog.Logger) *slog.Logger {
	if l.Enabled(context.Background(), slog.LevelDebug) {
		return l
	}
	return slog.New(minLevel{Handler: l.Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: m.Handler.WithAttrs(a), min: m.min}
}

func (m minLevel) WithGroup(g string) slog.Handler {
	return minLevel{Handler: m.Handler.WithGroup(g), min: m.min}
}
