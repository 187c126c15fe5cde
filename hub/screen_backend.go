package hub

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/screen"
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

func newScreen(f *operator, done <-chan struct{}) *screen.Screen {
	return screen.New(screen.Options{
		Backend: screenBackend{f},
		Done:    done,
		Logger:  f.log.With("component", "screen"),
		Refused: func(r *http.Request, reason string) {
			f.refusals.note(slog.LevelInfo, "operator_auth_refused", reason, "path", clip(r.URL.Path), "remote", r.RemoteAddr)
		},
	})
}

func (b screenBackend) Verify(token string) (authority.Principal, bool) {
	if token == "" {
		return authority.Principal{}, false
	}
	return b.f.tokens.Verify(token)
}

func (b screenBackend) Servers() []screen.Server {
	rows := b.f.control.serverRows()
	out := make([]screen.Server, 0, len(rows))
	for _, r := range rows {
		s := screen.Server{Name: r.Name, Shared: r.Shared, State: r.State, Unlisted: r.UnlistedAnnotations,
			Launch: screen.Launch{Transport: r.Launch.Transport, Command: r.Launch.Command, Args: r.Launch.Args,
				URL: r.Launch.URL, Env: r.Launch.Env, Headers: r.Launch.Headers}}
		for _, c := range r.Nodes {
			seat, reason := seatOfReason(c.Reason)
			s.Cells = append(s.Cells, screen.Cell{Node: c.Node, State: c.State, Reason: reason, Seat: seat,
				NextRestart: c.NextRestart, Tools: c.Tools})
		}
		out = append(out, s)
	}
	return out
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
		out = append(out, screen.Tool{Name: e.Name, Source: string(e.Source), Description: e.Description,
			Hints: e.Hints, Delivers: e.Delivers, Args: e.ArgCount(), PerSeat: perSeat})
	}
	for _, e := range CompanyRegistry(b.f.company).Entries() {
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

func (b screenBackend) AddServer(entry config.MCPServer, write bool) screen.AddResult {
	a := b.f.addServer(entry, write)
	return screen.AddResult{Status: a.status, Class: string(a.class), Error: a.err, Violations: a.violations}
}

func (b screenBackend) Changes() (uint64, <-chan struct{}) { return b.f.changes.watch() }
