package hub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/atomicfile"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream"
	"go.yaml.in/yaml/v3"
)

// The states a server's row reads on the operator surface (MCP-12).
const (
	rowRunning     = "Running"
	rowPartly      = "Partly failing"
	rowFailing     = "Failing"
	rowWaiting     = "Waiting for credentials"
	rowNotStarted  = "Not started"
	rowNotReported = "Not reported"
)

// nodeCell is one node's report of a server. This build runs one node, so a
// row has one cell; a fleet adds one per live node from its heartbeat.
type nodeCell struct {
	Node   string `json:"node"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// NextRestart is when a down server is tried again (RFC 3339).
	NextRestart string `json:"next_restart,omitempty"`
	Tools       int    `json:"tools"`
}

type launch struct {
	Transport string            `json:"transport"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	URL       string            `json:"url,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

type serverRow struct {
	Name                string     `json:"name"`
	Shared              bool       `json:"shared"`
	State               string     `json:"state"`
	Reason              string     `json:"reason,omitempty"`
	Nodes               []nodeCell `json:"nodes"`
	Launch              launch     `json:"launch"`
	UnlistedAnnotations []string   `json:"unlisted_annotations"`
}

var onlyRefs = regexp.MustCompile(`^([^$]{0,16}\$\{[A-Za-z_][A-Za-z0-9_]*\})+[^$]{0,16}$`)

// maskValue shows a configured value as written when it is references (with
// a short literal around them, as in "Bearer ${TOKEN}"), and hides any other
// literal, which may itself be a credential.
func maskValue(v string) string {
	if v == "" || onlyRefs.MatchString(v) {
		return v
	}
	return fmt.Sprintf("(literal, %d characters)", len(v))
}

func (h *Hub) launchOf(d config.MCPServer) launch {
	l := launch{Transport: d.EffectiveTransport(), Command: d.Command, URL: d.URL}
	// Arguments are passed as written; anything in them that is a known
	// secret is redacted like a tool result.
	for _, a := range d.Args {
		if clean, err := h.clean.Text(a); err == nil {
			a = clean
		}
		l.Args = append(l.Args, a)
	}
	mask := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = maskValue(v)
		}
		return out
	}
	l.Env, l.Headers = mask(d.Env), mask(d.Headers)
	return l
}

// rows reports every declared server, in declaration order.
func (h *Hub) serverRows() []serverRow {
	c := h.Company()
	u := h.ups
	u.mu.Lock()
	defer u.mu.Unlock()
	var rows []serverRow
	for _, d := range c.MCPServers {
		row := serverRow{Name: d.Name, Shared: d.IsShared(), Launch: h.launchOf(d), UnlistedAnnotations: []string{}}
		var insts []*upstreamServer
		for _, inst := range u.byName {
			if inst.decl.Name == d.Name {
				insts = append(insts, inst)
			}
		}
		sort.Slice(insts, func(i, j int) bool { return insts[i].seat < insts[j].seat })
		cell := nodeCell{Node: "this node", State: rowNotReported}
		if len(insts) == 0 && !d.IsShared() {
			cell.State, cell.Reason = rowNotStarted, "no agent seat declares credentials for it under mcp_env"
		}
		var states []nodeCell
		for _, s := range insts {
			row.UnlistedAnnotations = append(row.UnlistedAnnotations, s.unlisted...)
			states = append(states, instanceCell(s))
		}
		if len(states) > 0 {
			cell = aggregate(states)
		}
		row.Nodes = []nodeCell{cell}
		row.State, row.Reason = rollUp(row.Nodes)
		rows = append(rows, row)
	}
	return rows
}

// instanceCell reads one instance's state.
func instanceCell(s *upstreamServer) nodeCell {
	cell := nodeCell{Node: "this node", State: rowNotReported}
	who := ""
	if s.seat != "" {
		who = "seat " + s.seat + ": "
	}
	switch {
	case s.hold != nil && s.hold.State == upstream.Waiting:
		cell.State, cell.Reason = rowWaiting, who+s.hold.Sentence
	case s.hold != nil:
		cell.State, cell.Reason = rowFailing, who+s.hold.Sentence
	case s.fileErr != "":
		cell.State, cell.Reason = rowFailing, who+s.fileErr
	case s.inst != nil:
		st := s.inst.Status()
		cell.Tools = st.Tools
		switch st.State {
		case upstream.StateRunning:
			cell.State = rowRunning
		case upstream.StateStarting:
			cell.State, cell.Reason = rowNotStarted, who+"its first start is under way"
		case upstream.StateStopped:
			cell.State, cell.Reason = rowNotStarted, who+st.Cause
		default:
			// A server that is down counts as failed, with what took it
			// down, until it is back.
			cell.State, cell.Reason = rowFailing, who+st.Cause
			if !st.NextRestart.IsZero() {
				cell.NextRestart = st.NextRestart.UTC().Format("2006-01-02T15:04:05Z07:00")
			}
		}
	}
	return cell
}

// aggregate folds a node's instances of one server (a shared server has one,
// a per-role template one per seat) into the node's cell: the first failure
// explains a failing cell, the first wait a waiting one.
func aggregate(cells []nodeCell) nodeCell {
	out := nodeCell{Node: "this node"}
	var running, failing, waiting int
	for _, c := range cells {
		out.Tools = max(out.Tools, c.Tools)
		switch c.State {
		case rowRunning:
			running++
		case rowFailing:
			failing++
			if failing == 1 {
				out.Reason, out.NextRestart = c.Reason, c.NextRestart
			}
		case rowWaiting:
			waiting++
		}
	}
	switch {
	case failing > 0 && running > 0:
		out.State = rowPartly
	case failing > 0:
		out.State = rowFailing
	case waiting > 0:
		out.State = rowWaiting
		for _, c := range cells {
			if c.State == rowWaiting {
				out.Reason = c.Reason
				break
			}
		}
	case running == len(cells):
		out.State = rowRunning
	default:
		out.State, out.Reason = cells[0].State, cells[0].Reason
	}
	return out
}

// rollUp reads a row's state from its cells: all running is Running, some
// failing is Partly failing, all failing is Failing, and a wait shows only
// where nothing else is wrong. The reason is the first failure's, else the
// first wait's.
func rollUp(cells []nodeCell) (string, string) {
	var running, failing, waiting, reported int
	reason := ""
	for _, c := range cells {
		switch c.State {
		case rowRunning:
			running++
		case rowFailing, rowPartly:
			failing++
			if c.State == rowPartly {
				running++
			}
			if reason == "" {
				reason = c.Node + ": " + c.Reason
			}
		case rowWaiting:
			waiting++
		}
		if c.State != rowNotReported {
			reported++
		}
	}
	switch {
	case reported == 0:
		return rowNotReported, ""
	case failing > 0 && running > 0:
		return rowPartly, reason
	case failing > 0:
		return rowFailing, reason
	case waiting > 0:
		for _, c := range cells {
			if c.State == rowWaiting {
				return rowWaiting, c.Node + ": " + c.Reason
			}
		}
	case running == reported:
		return rowRunning, ""
	}
	return rowNotStarted, ""
}

func (f *front) serveMCPServers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"servers": f.h.serverRows()})
}

// serveMCPServer is a server's own page: its row, each node's full reason,
// and its tools, or that it registered none and why.
func (f *front) serveMCPServer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	for _, row := range f.h.serverRows() {
		if row.Name != name {
			continue
		}
		var tools []toolRow
		seen := map[string]bool{}
		for _, cat := range append([]*Catalogue{f.h.company}, f.h.ups.seatCatalogues()...) {
			for _, e := range cat.Entries() {
				if e.Source == SourceMCP(name) && !seen[e.Name] {
					seen[e.Name] = true
					tools = append(tools, toolRow{Name: e.Name, Source: e.Source, Description: e.Description,
						Annotations: e.Hints, Delivers: e.Delivers, ArgCount: e.ArgCount()})
				}
			}
		}
		reach := "every seat (shared)"
		if !row.Shared {
			reach = "each seat that declares credentials for it, its own child (per-role)"
		}
		page := map[string]any{"server": row, "reach": reach, "tools": tools}
		if len(tools) == 0 {
			why := row.Reason
			if why == "" {
				why = "its server listed no tools"
			}
			page["tools"] = []toolRow{}
			page["no_tools_because"] = why
		}
		writeJSON(w, http.StatusOK, page)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"class": string(authority.NotFound), "error": fmt.Sprintf("no MCP server called %q is configured", name)})
}

// servePutMCPServer adds a server to the company file (OPS-7). It creates
// only: If-None-Match: * is required and a configured name is refused. The
// whole company is checked with the server in it before anything is
// written, every violation answered at once; the server goes after every
// server already declared, and the revision is applied.
func (f *front) servePutMCPServer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	fail := func(status int, class authority.Class, msg string, extra ...any) {
		body := map[string]any{"class": string(class), "error": msg}
		for i := 0; i+1 < len(extra); i += 2 {
			body[extra[i].(string)] = extra[i+1]
		}
		writeJSON(w, status, body)
	}
	if r.Header.Get("If-None-Match") != "*" {
		fail(http.StatusPreconditionRequired, authority.Invalid, "send If-None-Match: * — this route only creates a server, never replaces one")
		return
	}
	path := f.h.opts.ConfigFile
	if path == "" {
		fail(http.StatusConflict, authority.Forbidden, "this hub runs its embedded company; start it with --config FILE to add servers")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 256<<10))
	if err != nil {
		fail(http.StatusRequestEntityTooLarge, authority.Invalid, "the body is over 256 KiB")
		return
	}
	var entry config.MCPServer
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	if err := dec.Decode(&entry); err != nil {
		fail(http.StatusBadRequest, authority.Invalid, "the body is not one MCP server entry: "+err.Error())
		return
	}
	if entry.Name == "" {
		entry.Name = name
	}
	if entry.Name != name {
		fail(http.StatusBadRequest, authority.Invalid, fmt.Sprintf("the body names %q but the path names %q", entry.Name, name))
		return
	}
	f.putMu.Lock()
	defer f.putMu.Unlock()
	current, err := os.ReadFile(path)
	if err != nil {
		f.h.log.Error("config_read_failed", "error", err.Error())
		fail(http.StatusInternalServerError, authority.InternalError, authority.InternalErrorSentence)
		return
	}
	// Judged against the configuration alone: a name only a node still
	// runs from an older revision is free.
	if c, err := config.Parse(current); err == nil || c != nil {
		for _, s := range c.MCPServers {
			if s.Name == name {
				fail(http.StatusPreconditionFailed, authority.Exists, fmt.Sprintf("an MCP server called %q is already configured; edit the company file to change it", name))
				return
			}
		}
	}
	next, err := appendServer(current, entry)
	if err != nil {
		fail(http.StatusUnprocessableEntity, authority.Invalid, err.Error())
		return
	}
	c, err := config.Parse(next)
	var v config.Violations
	if errors.As(err, &v) {
		fail(http.StatusUnprocessableEntity, authority.Invalid, "the company would not be valid with this server", "violations", []string(v))
		return
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, next, mode); err != nil {
		f.h.log.Error("config_write_failed", "error", err.Error())
		fail(http.StatusInternalServerError, authority.InternalError, authority.InternalErrorSentence)
		return
	}
	if err := f.h.Apply(c); err != nil {
		fail(http.StatusUnprocessableEntity, authority.Invalid, "written, but the revision was not applied: "+err.Error())
		return
	}
	f.h.log.Info("mcp_server_added", "server", name)
	for _, row := range f.h.serverRows() {
		if row.Name == name {
			writeJSON(w, http.StatusCreated, map[string]any{"server": row})
			return
		}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"server": name})
}

// appendServer adds entry after the last mcp_servers entry of a document,
// keeping the rest of it (comments included) as written.
func appendServer(doc []byte, entry config.MCPServer) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("the company file is not valid YAML: %w", err)
	}
	if root.Kind == 0 {
		root = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, errors.New("the company file is not a mapping")
	}
	var entryNode yaml.Node
	if err := entryNode.Encode(entryYAML(entry)); err != nil {
		return nil, err
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "mcp_servers" {
			list = top.Content[i+1]
		}
	}
	if list == nil || list.Tag == "!!null" {
		if list == nil {
			top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "mcp_servers"}, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"})
			list = top.Content[len(top.Content)-1]
		} else {
			*list = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		}
	}
	if list.Kind != yaml.SequenceNode {
		return nil, errors.New("mcp_servers in the company file is not a list")
	}
	list.Style = 0
	list.Content = append(list.Content, &entryNode)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// entryYAML is the entry as a mapping holding only what was set, in the
// order a person would write it.
func entryYAML(e config.MCPServer) yaml.Node {
	m := yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v any) {
		var vn yaml.Node
		_ = vn.Encode(v)
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &vn)
	}
	add("name", e.Name)
	if e.Transport != "" {
		add("transport", e.Transport)
	}
	if e.Command != "" {
		add("command", e.Command)
	}
	if len(e.Args) > 0 {
		add("args", e.Args)
	}
	if e.URL != "" {
		add("url", e.URL)
	}
	if e.Shared != nil {
		add("shared", *e.Shared)
	}
	if len(e.Env) > 0 {
		add("env", sortedMap(e.Env))
	}
	if len(e.Headers) > 0 {
		add("headers", sortedMap(e.Headers))
	}
	if e.ToolPrefix != "" {
		add("tool_prefix", e.ToolPrefix)
	}
	if len(e.ToolAnnotations) > 0 {
		add("tool_annotations", e.ToolAnnotations)
	}
	if len(e.OptionalKeys) > 0 {
		add("optional_keys", e.OptionalKeys)
	}
	if e.StartupTimeoutSeconds != 0 {
		add("startup_timeout_seconds", e.StartupTimeoutSeconds)
	}
	return m
}

func sortedMap(m map[string]string) yaml.Node {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	n := yaml.Node{Kind: yaml.MappingNode}
	for _, k := range keys {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &yaml.Node{Kind: yaml.ScalarNode, Value: m[k], Style: yaml.DoubleQuotedStyle})
	}
	return n
}
