package screen

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/toolpin"
	"github.com/crewlet/hub/hub/toolscan"
)

// The review of held tools (issue 28): every third-party tool a pinned
// server lists that no person approved as it reads now, with what was
// approved before beside it, what moved in its schemas and hints, and what
// the scanner flagged, for an administrator to approve or reject. The
// decision is made by the hub's decide_tool_change, as the signed-in
// person, so it is refused, recorded and attributed exactly as there.

// ToolDecision is what a review form asks: approve or reject held tools of
// one server, each at the fingerprint the page showed, or all the server
// holds when Tools is empty.
type ToolDecision struct {
	Server  string
	Verdict string
	Tools   []toolpin.DecideTool
	// Key names the decision as an Idempotency-Key names a request on
	// /operator/act: drawn with the form, so a form sent twice decides
	// once.
	Key string
}

// DecideResult is what deciding answered: the refusal's class and
// sentence, or each tool decided and whether this node offers it now.
type DecideResult struct {
	Class, Error string
	Tools        []DecidedTool
}

// DecidedTool is one tool a decision covered.
type DecidedTool struct {
	Tool string
	// Now is offered or held, on this node once the decision answered.
	Now string
}

// changesPage is the review page.
type changesPage struct {
	Admin   bool
	Servers []heldServer
	Version uint64
	// Notice is what the last decision answered, on the page it returns.
	Notice *decisionNotice
}

// heldServer is one server's held tools.
type heldServer struct {
	Server string
	Tools  []heldTool
	// Key names this server's approve-all or reject-all decision.
	Key string
}

// heldTool is one held tool as the page draws it.
type heldTool struct {
	toolpin.Change
	// Proposed is the description the server lists now, cut at the
	// scanner's flags; Approved is the one a person approved, if any.
	Proposed []descPart
	Approved string
	Key      string
	// Def is the rest of what an approval covers: hints and arguments.
	Def heldDef
}

// descPart is a run of a description: flagged by the scanner, or not.
type descPart struct {
	Text string
	Flag *toolscan.Flag
}

// decisionNotice says what a decision did, or why it was refused.
type decisionNotice struct {
	Refused bool
	Text    string
}

func (s *Screen) changesPage(v *viewer) changesPage {
	ver, _ := s.opts.Backend.Changes()
	d := changesPage{Admin: v.Admin, Version: ver}
	at := map[string]int{}
	for _, ch := range s.opts.Backend.HeldTools() {
		i, ok := at[ch.Server]
		if !ok {
			i = len(d.Servers)
			at[ch.Server] = i
			d.Servers = append(d.Servers, heldServer{Server: ch.Server, Key: newKey()})
		}
		t := heldTool{Change: ch, Proposed: splitAtFlags(ch.Proposed.Description, ch.Flags), Key: newKey(),
			Def: readDef(ch.Proposed.Annotations, ch.Proposed.InputSchema)}
		if ch.Approved != nil {
			t.Approved = ch.Approved.Def.Description
		}
		d.Servers[i].Tools = append(d.Servers[i].Tools, t)
	}
	return d
}

// heldCount is how many tools are held, for the main page's pointer here.
func (s *Screen) heldCount() int { return len(s.opts.Backend.HeldTools()) }

func (s *Screen) serveChanges(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	s.render(w, r, http.StatusOK, page{Title: "Tool changes", Viewer: v, Body: "changes", Data: s.changesPage(v)})
}

// serveDecide takes a review form: one tool (tool and fingerprint) or a
// whole server, approved or rejected. The page comes back with what the
// decision did; a refusal keeps its status, so a script or a test reads it
// without parsing the page.
func (s *Screen) serveDecide(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	d := ToolDecision{Server: r.PostFormValue("server"), Verdict: r.PostFormValue("decision"), Key: r.PostFormValue("key")}
	if tool := r.PostFormValue("tool"); tool != "" {
		d.Tools = []toolpin.DecideTool{{Tool: tool, Fingerprint: r.PostFormValue("fingerprint")}}
	}
	res := s.opts.Backend.DecideTools(r.Context(), v.Principal, d)
	status, notice := http.StatusOK, &decisionNotice{Text: decidedText(d, res)}
	if res.Error != "" {
		status, notice = authority.HTTPStatus(authority.Class(res.Class)), &decisionNotice{Refused: true, Text: res.Error}
	}
	p := s.changesPage(v)
	p.Notice = notice
	s.render(w, r, status, page{Title: "Tool changes", Viewer: v, Body: "changes", Data: p})
}

// decidedText says what a decision did, tool by tool.
func decidedText(d ToolDecision, res DecideResult) string {
	verb := "Approved"
	if d.Verdict == string(toolpin.Reject) {
		verb = "Rejected"
	}
	var parts []string
	for _, t := range res.Tools {
		parts = append(parts, fmt.Sprintf("%s (now %s)", t.Tool, t.Now))
	}
	return fmt.Sprintf("%s on %s: %s.", verb, d.Server, strings.Join(parts, ", "))
}

// newKey names one form's decision: drawn again with every page, so two
// sendings of one form are one decision, and two forms two.
func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "screen-" + hex.EncodeToString(b[:])
}

// splitAtFlags cuts a description at its flags' spans, so the page marks
// each flagged run where it is. A flag overlapping one already marked is
// listed beside the text, not marked twice.
func splitAtFlags(desc string, flags []toolscan.Flag) []descPart {
	fs := make([]toolscan.Flag, 0, len(flags))
	for _, f := range flags {
		// A flag in a parameter's description is listed with its field,
		// not marked in the tool's.
		if f.Field == "" && f.Start >= 0 && f.Start < f.End && f.End <= len(desc) {
			fs = append(fs, f)
		}
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Start < fs[j].Start })
	var out []descPart
	at := 0
	for i := range fs {
		f := &fs[i]
		if f.Start < at {
			continue
		}
		if f.Start > at {
			out = append(out, descPart{Text: desc[at:f.Start]})
		}
		out = append(out, descPart{Text: desc[f.Start:f.End], Flag: f})
		at = f.End
	}
	if at < len(desc) {
		out = append(out, descPart{Text: desc[at:]})
	}
	return out
}
