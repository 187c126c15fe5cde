package agent

import (
	"context"
	"log/slog"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
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

// BuiltinDeps is what the engine's built-in tools are given. A tool
// whose dependency is missing is not registered at all (CAT-3): with no
// store there is no diary, skill, onboarding mark or private channel, and
// with no tool skills no load_tool_skill, and with no sandbox (a machine
// without bubblewrap) no run_sandbox.
type BuiltinDeps struct {
	Directory  DirectorySource
	Store      *Store
	ToolSkills []ToolSkill
	// Episodes is the search of the seats' past turns (OpenEpisodeSearch);
	// nil: query_episodes recalls by conversation and recency only, and
	// refuses a query as unavailable.
	Episodes *search.Index
	// Knowledge is the company's knowledge base where it is a vendor's
	// (knowledge.backend other than native); nil where the engine's own
	// serves search_knowledge, or there is none.
	Knowledge *VendorKnowledge
	// Condense rewrites a recalled turn's long ask or account shorter with
	// the caller's seat's auxiliary model (Condenser.Condense); nil: they
	// are carried whole.
	Condense func(ctx context.Context, c authority.Caller, text string, budget int) (condensed, model string, err error)
	// Sandbox opens coding runs' boxes; nil: no run_sandbox. Runtime is
	// the runtime once it has started (nil before), which runs the runs.
	Sandbox *Sandbox
	Runtime func() *Runtime
}

// builtins serves the built-in tools' bodies.
type builtins struct {
	dir      DirectorySource
	store    *Store
	writes   *servers.Writes
	episodes *search.Index
	condense func(ctx context.Context, c authority.Caller, text string, budget int) (string, string, error)
}

// Hints of the built-ins: a seat's own memory and skills change nothing
// anybody else sees and reach nobody.
var (
	readOwn  = servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.No}
	writeOwn = servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}
)

// BuiltinTools is the engine's built-in tool table (BLT-1), filtered by
// what this node has. search_knowledge is the native knowledge base's own
// where the company runs it, and a builtin over the vendor's search where
// it runs another (KB-3).
func BuiltinTools(d BuiltinDeps) []servers.Tool {
	dir := d.Directory
	tools := []servers.Tool{
		servers.Typed("lookup_colleague",
			"Find a colleague by handle, role name or a person's contact id. Matching ignores case and falls back to partial and then fuzzy matches; an ambiguous query answers the candidates so you can pick one and ask again by handle.",
			readOwn, "",
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
	if d.Store != nil && d.Store.node != nil {
		b := &builtins{dir: dir, store: d.Store, episodes: d.Episodes, condense: d.Condense, writes: servers.NewWrites(d.Store.node, servers.WritesOptions{
			Server: "the agent runtime", Look: "refresh_memory, use_skill or query_episodes"})}
		tools = append(tools,
			servers.Typed("reflect_and_persist",
				"Keep one fact in your private diary for later turns: kind long for what stays true, short for what matters over the next days. Only you read it; knowledge the team shares belongs on a knowledge page.",
				writeOwn, "", b.reflectAndPersist),
			servers.Typed("refresh_memory",
				"Read your private diary again, by what the turn turns out to be about: the notes sharing words with the query, whole. Without a query, every long note and the recent short ones.",
				readOwn, "", b.refreshMemory),
			servers.Typed("query_episodes",
				"Recall your own past turns: what woke each, what you answered and how it ended. By meaning (query; by its words where the hub has no embeddings model, which the answer says), by what they were about (conversation: an item key, a page id), or most recent first. A query also finds your compacted months (months): the record of a closed month's turns, each of which is still recalled whole.",
				readOwn, "", b.queryEpisodes),
			servers.Typed("use_skill",
				"Read one of your own skills, a procedure you keep for yourself, by name.",
				readOwn, "", b.useSkill),
			servers.Typed("refine_skill",
				"Write a corrected procedure as the new body of one of your own skills; the previous version is kept. Your skills are kept from your own turns: a name you have no skill by is not_found.",
				writeOwn, "", b.refineSkill),
			servers.Typed("mark_onboarded",
				"Stamp your onboarding mark once you have read the onboarding pages that matter to your role; offered in your onboarding pass, which runs before your first turn's work until you have.",
				writeOwn, "", b.markOnboarded),
			servers.Typed("a2a_ask",
				"Ask one AI colleague one question over the private channel and wait for its answer. The colleague sees only your question, so make it complete.",
				servers.Hints{ReadOnly: servers.No, Destructive: servers.No, Idempotent: servers.No, OpenWorld: servers.No}, "a2a", b.a2aAsk),
		)
	}
	if d.Knowledge != nil {
		tools = append(tools, servers.Typed("search_knowledge", vendorSearchDescription,
			servers.Hints{ReadOnly: servers.Yes, Destructive: servers.No, Idempotent: servers.Yes, OpenWorld: servers.Yes}, "", d.Knowledge.searchKnowledge))
	}
	if d.Sandbox != nil && d.Runtime != nil {
		tools = append(tools, runSandboxTool(d.Sandbox, d.Runtime))
	}
	if len(d.ToolSkills) > 0 {
		tools = append(tools, servers.Typed("load_tool_skill",
			"Load the full text of a tool skill by key (skill:artifacts). The tools a skill guards are held back in your turn until you have loaded it.",
			readOwn, "", loadToolSkill(d.ToolSkills)))
	}
	return tools
}

// NewBuiltinServer serves the built-in tools as a first-party MCP server that
// believes caller metadata only under trust.
func NewBuiltinServer(d BuiltinDeps, trust servers.Trust, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crewlet-builtins", Version: servers.Version}, &mcp.ServerOptions{Logger: log})
	servers.Register(s, trust, log, BuiltinTools(d)...)
	return s
}
