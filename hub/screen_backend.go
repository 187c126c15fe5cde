package hub

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/screen"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/servers"
)

// screenBackend is what the screen (Settings › MCP Tools) is given of the
// operator surface: the server rows and catalogues read as its view model,
// the tokens, the secret store's names, the same create-only write as
// PUT /config/mcp-servers/{name}, and the change feed. It is the one place
// that knows both the hub's status rows and the screen's view, so a fleet's
// per-node cells reach the screen by changing only rows and this adapter.
type screenBackend struct {
	f *operator
}

var _ screen.Backend = screenBackend{}

func newScreen(f *operator, done <-chan struct{}, g screen.Grants) *screen.Screen {
	return screen.New(screen.Options{
		Backend: screenBackend{f},
		Done:    done,
		Logger:  f.log.With("component", "screen"),
		Refused: func(r *http.Request, reason string) {
			f.refusals.note(slog.LevelInfo, "operator_auth_refused", reason, "path", clip(r.URL.Path), "remote", r.RemoteAddr)
		},
		Sessions: f.opts.ScreenSessions,
		// The API's own counter: a wrong token counts once whether it
		// came to the API or the sign-in (http_guard.go).
		Wrong:  f.wrong,
		Grants: g,
	})
}

func (b screenBackend) Verify(token string) (authority.Principal, bool) {
	if token == "" {
		return authority.Principal{}, false
	}
	return b.f.tokens.Verify(token)
}

func (b screenBackend) Current(tokenID string, digest [sha256.Size]byte) (authority.Principal, bool) {
	return b.f.tokens.Current(tokenID, digest)
}

func (b screenBackend) Servers() []screen.Server {
	rows := b.f.control.serverRows()
	out := make([]screen.Server, 0, len(rows))
	for _, r := range rows {
		out = append(out, screenRow(r))
	}
	return out
}

// screenRow reads a status row as the screen's view of it.
func screenRow(r serverRow) screen.Server {
	s := screen.Server{Name: r.Name, Shared: r.Shared, State: r.State, Unlisted: r.UnlistedAnnotations,
		Launch: screen.Launch{Transport: r.Launch.Transport, Command: r.Launch.Command, Args: r.Launch.Args,
			URL: r.Launch.URL, Env: r.Launch.Env, Headers: r.Launch.Headers}}
	for _, c := range r.Nodes {
		seat, reason := seatOfReason(c.Reason)
		cell := screen.Cell{Node: c.Node, State: c.State, Reason: reason, Seat: seat,
			NextRestart: c.NextRestart, Tools: c.Tools, ReasonsOmitted: c.ReasonsOmitted}
		for _, r := range c.Reasons {
			cell.Reasons = append(cell.Reasons, screen.CellReason{State: r.State, Text: r.Reason, Seats: r.Seats, NextRestart: r.NextRestart})
		}
		s.Cells = append(s.Cells, cell)
	}
	return s
}

// seatOfReason splits the seat an instance's reason names ("seat ada: ...",
// as the status table words it for a seat's child) from the reason.
func seatOfReason(reason string) (seat, rest string) {
	if after, ok := strings.CutPrefix(reason, "seat "); ok {
		if seat, rest, ok := strings.Cut(after, ": "); ok && !strings.ContainsAny(seat, " \t\n") {
			return seat, rest
		}
	}
	return "", reason
}

// Tools is the company catalogue, then every seat's own children's tools
// (once per name and source), which no operator is offered but which say
// what a per-seat server brings.
func (b screenBackend) Tools() []screen.Tool {
	var out []screen.Tool
	seen := map[string]bool{}
	add := func(e Entry, perSeat bool) {
		key := string(e.Source) + "\x00" + e.Name
		if seen[key] {
			return
		}
		seen[key] = true
		t := screen.Tool{Name: e.Name, Source: string(e.Source), Description: e.Description,
			Hints: e.Hints, Delivers: e.Delivers, Args: e.ArgCount(), PerSeat: perSeat}
		if e.Quarantine != nil {
			t.Held = e.Quarantine.State
		}
		// A builtin is served by one of the hub's first-party servers,
		// which the screen folds the builtins by.
		if m, ok := e.backend.(*mounted); ok && e.Source == SourceBuiltin {
			t.Server = m.name
		}
		out = append(out, t)
	}
	// The whole catalogue, held tools with the rest, as GET /tools lists
	// it: what a registry offers leaves them out.
	for _, e := range b.f.company.Entries() {
		add(e, false)
	}
	for _, c := range b.f.control.seatCatalogues() {
		for _, e := range c.Entries() {
			add(e, true)
		}
	}
	return out
}

func (b screenBackend) SecretNames() []string {
	if b.f.opts.SecretNames == nil {
		return nil
	}
	return b.f.opts.SecretNames()
}

func (b screenBackend) AddServer(ctx context.Context, entry config.MCPServer, write bool) screen.AddResult {
	a := b.f.addServer(entry, write)
	res := screen.AddResult{Status: a.status, Class: string(a.class), Error: a.err, Violations: a.violations, Entry: a.entry}
	if a.status == http.StatusCreated {
		if row, ok := b.firstState(ctx, entry); ok {
			res.Server = &row
		}
	}
	return res
}

// firstStartWait bounds how long the form's answer waits for a server's
// first start when its entry names no startup_timeout_seconds: the time
// the hub gives a start by default.
const firstStartWait = 60 * time.Second

// firstState waits until no instance of a server just added is still in
// its first start on this node, then reads its row. Its tools are filed,
// or refused, before a start reads as running, so the row it answers is
// the one the table shows next, collision included. The wait follows the
// change feed, bounded by the server's own startup timeout and by ctx;
// what it answers when either ends first still says the start is under
// way.
func (b screenBackend) firstState(ctx context.Context, entry config.MCPServer) (screen.Server, bool) {
	wait := time.Duration(entry.StartupTimeoutSeconds) * time.Second
	if wait <= 0 {
		wait = firstStartWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		// Watched before the rows are read, so a change in between is
		// not missed.
		_, changed := b.f.changes.watch()
		row, ok := b.row(entry.Name)
		if !ok {
			return screen.Server{}, false
		}
		if !b.starting(row) {
			return screenRow(row), true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return screenRow(row), true
		}
	}
}

// row is one server's status row.
func (b screenBackend) row(name string) (serverRow, bool) {
	for _, r := range b.f.control.serverRows() {
		if r.Name == name {
			return r, true
		}
	}
	return serverRow{}, false
}

// starting reports whether any of this node's instances of a row's server
// is still in its first start: its cell counts an instance as not
// started. A node that runs none (a per-seat server no seat it acts for
// declares credentials for) has nothing to wait for.
func (b screenBackend) starting(r serverRow) bool {
	self := "this node"
	if b.f.opts.Fleet != nil {
		self = b.f.opts.Fleet.Node
	}
	for _, c := range r.Nodes {
		if c.Node == self {
			return c.Instances > 0 && c.Counts[rowNotStarted] > 0
		}
	}
	return false
}

func (b screenBackend) Changes() (uint64, <-chan struct{}) { return b.f.changes.watch() }

func (b screenBackend) HeldTools() []toolpin.Change { return b.f.control.toolChanges() }

// DecideTools decides through decide_tool_change, called as the signed-in
// person on the operator catalogue, so the screen's decision is refused,
// recorded and attributed exactly as one made over /operator/act; the
// form's key names the operation as an Idempotency-Key does there, so a
// form sent twice is one decision.
func (b screenBackend) DecideTools(ctx context.Context, p authority.Principal, d screen.ToolDecision) screen.DecideResult {
	const tool = "decide_tool_change"
	if err := checkKey(d.Key); err != nil {
		return screen.DecideResult{Class: string(authority.Invalid), Error: "This form carries no key naming its decision; draw the page again and decide from it."}
	}
	args, err := json.Marshal(map[string]any{"server": d.Server, "decision": d.Verdict, "tools": d.Tools})
	if err != nil {
		return screen.DecideResult{Class: string(authority.InternalError), Error: authority.InternalErrorSentence}
	}
	caller := p.Caller()
	caller.Operation = d.Key
	res := b.f.router.decoded(ctx, tool, b.f.router.callForPerson(ctx, CompanyRegistry(b.f.company), caller, tool, args))
	if res.IsError {
		class, _ := servers.ClassOf(res)
		return screen.DecideResult{Class: string(class), Error: textOf(res)}
	}
	var out struct {
		Tools []struct{ Tool, Now string } `json:"tools"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		b.f.log.ErrorContext(ctx, "screen_decision_unreadable", "error", err.Error())
		return screen.DecideResult{Class: string(authority.InternalError), Error: authority.InternalErrorSentence}
	}
	r := screen.DecideResult{}
	for _, t := range out.Tools {
		r.Tools = append(r.Tools, screen.DecidedTool{Tool: t.Tool, Now: t.Now})
	}
	return r
}
