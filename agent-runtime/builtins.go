package agent

import (
	"context"
	"log/slog"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DirectorySource returns the directory of the revision in force; it is
// called per call, so a reload is seen by the next call.
type DirectorySource func() *authority.Directory

type lookupIn struct {
	Query string `json:"query" jsonschema:"a colleague's handle, role name or a person's contact id (email, chat id); case does not matter and a partial or misspelt name is tried too"`
}

type lookupOut struct {
	// Match is the one seat the query resolved to.
	Match *Colleague `json:"match,omitempty"`
	// MatchedBy says how: handle, role, contact_id, partial or fuzzy.
	MatchedBy string `json:"matched_by"`
	// Candidates are the seats an ambiguous query fits; pick one and ask
	// again by its handle.
	Candidates []Colleague `json:"candidates,omitempty"`
}

// BuiltinTools is the engine's built-in tool table, over a directory.
func BuiltinTools(dir DirectorySource) []servers.Tool {
	return []servers.Tool{
		servers.Typed("lookup_colleague",
			"Find a colleague by handle, role name or a person's contact id. Matching ignores case and falls back to partial and then fuzzy matches; an ambiguous query answers the candidates so you can pick one and ask again by handle.",
			servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}, "",
			func(ctx context.Context, _ authority.Caller, in lookupIn) (lookupOut, error) {
				if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(in.Query), "@")) == "" {
					return lookupOut{}, authority.Refuse(authority.Invalid, "query is empty; give a handle, a role name or a contact id.")
				}
				seats, how := matchColleagues(dir(), in.Query)
				switch len(seats) {
				case 0:
					return lookupOut{}, authority.Refuse(authority.NotFound, "Nobody in the company matches %q by handle, role name or contact id, not even approximately.", in.Query)
				case 1:
					c := colleagueOf(seats[0])
					return lookupOut{Match: &c, MatchedBy: how}, nil
				}
				out := lookupOut{MatchedBy: how}
				for _, s := range seats {
					out.Candidates = append(out.Candidates, colleagueOf(s))
				}
				return out, nil
			}),
	}
}

// NewBuiltinServer serves the built-in tools as a first-party MCP server that
// believes caller metadata only under trust.
func NewBuiltinServer(dir DirectorySource, trust servers.Trust, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-builtins", Version: servers.Version}, &mcp.ServerOptions{Logger: log})
	servers.Register(s, trust, log, BuiltinTools(dir)...)
	return s
}
