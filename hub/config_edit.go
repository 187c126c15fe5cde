package hub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/atomicfile"
	"gopkg.in/yaml.v3"
)

// servePutMCPServer adds a server to the company file (OPS-7). It creates
// only: If-None-Match: * is required and a configured name is refused. The
// whole company is checked with the server in it before anything is
// written, every violation answered at once; the server goes after every
// server already declared, and the revision is applied.
func (f *operator) servePutMCPServer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if r.Header.Get("If-None-Match") != "*" {
		writeAdded(w, added{status: http.StatusPreconditionRequired, class: authority.Invalid,
			err: "send If-None-Match: * — this route only creates a server, never replaces one"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 256<<10))
	if err != nil {
		writeAdded(w, added{status: http.StatusRequestEntityTooLarge, class: authority.Invalid, err: "the body is over 256 KiB"})
		return
	}
	var entry config.MCPServer
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	if err := dec.Decode(&entry); err != nil {
		writeAdded(w, added{status: http.StatusBadRequest, class: authority.Invalid, err: "the body is not one MCP server entry: " + err.Error()})
		return
	}
	if entry.Name == "" {
		entry.Name = name
	}
	if entry.Name != name {
		writeAdded(w, added{status: http.StatusBadRequest, class: authority.Invalid, err: fmt.Sprintf("the body names %q but the path names %q", entry.Name, name)})
		return
	}
	writeAdded(w, f.addServer(entry, true))
}

// added is what adding a server answered.
type added struct {
	status     int
	class      authority.Class
	err        string
	violations []string
	row        *serverRow
	name       string // the server added
	// entry is the new entry's path in the company (mcp_servers[N]),
	// which the violations about it name; empty when it was not placed.
	entry string
}

func writeAdded(w http.ResponseWriter, a added) {
	switch {
	case a.status == http.StatusCreated && a.row != nil:
		writeJSON(w, a.status, map[string]any{"server": a.row})
	case a.status == http.StatusCreated:
		writeJSON(w, a.status, map[string]any{"server": a.name})
	case a.status < 300:
		writeJSON(w, a.status, map[string]any{"status": "valid"})
	case a.violations != nil:
		writeJSON(w, a.status, map[string]any{"class": string(a.class), "error": a.err, "violations": a.violations})
	default:
		writeJSON(w, a.status, map[string]any{"class": string(a.class), "error": a.err})
	}
}

// addServer is the one create-only write behind PUT
// /config/mcp-servers/{name} and the screen's form: a configured name is
// refused, the whole company is checked with the server in it (tool name
// collisions included), and only then is the file written and the revision
// applied. With write false it stops before writing: the screen asks so
// when its form already has something wrong, to answer every violation at
// once.
func (f *operator) addServer(entry config.MCPServer, write bool) added {
	name := entry.Name
	path := f.opts.ConfigFile
	if path == "" {
		return added{status: http.StatusConflict, class: authority.Forbidden, err: "this hub runs its embedded company; start it with --config FILE to add servers"}
	}
	f.putMu.Lock()
	defer f.putMu.Unlock()
	current, err := os.ReadFile(path)
	if err != nil {
		f.log.Error("config_read_failed", "error", err.Error())
		return added{status: http.StatusInternalServerError, class: authority.InternalError, err: authority.InternalErrorSentence}
	}
	// Judged against the configuration alone: a name only a node still
	// runs from an older revision is free.
	if c, err := config.Parse(current); err == nil || c != nil {
		for _, s := range c.MCPServers {
			if s.Name == name && name != "" {
				return added{status: http.StatusPreconditionFailed, class: authority.Exists,
					err: fmt.Sprintf("an MCP server called %q is already configured; edit the company file to change it", name)}
			}
		}
	}
	next, at, err := appendServer(current, entry)
	if err != nil {
		return added{status: http.StatusUnprocessableEntity, class: authority.Invalid, err: err.Error()}
	}
	entryPath := fmt.Sprintf("mcp_servers[%d]", at)
	invalid := func(v config.Violations) added {
		return added{status: http.StatusUnprocessableEntity, class: authority.Invalid,
			err: "the company would not be valid with this server", violations: []string(v), entry: entryPath}
	}
	c, err := config.Parse(next)
	var v config.Violations
	if errors.As(err, &v) {
		return invalid(v)
	}
	// Names the servers already listed must not collide under it either
	// (CAT-12): refused before the file is touched.
	if err := f.control.check(c); errors.As(err, &v) {
		return invalid(v)
	}
	if !write {
		return added{status: http.StatusOK, entry: entryPath}
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, next, mode); err != nil {
		f.log.Error("config_write_failed", "error", err.Error())
		return added{status: http.StatusInternalServerError, class: authority.InternalError, err: authority.InternalErrorSentence}
	}
	if err := f.control.Apply(c); err != nil {
		return added{status: http.StatusUnprocessableEntity, class: authority.Invalid, err: "written, but the revision was not applied: " + err.Error()}
	}
	f.log.Info("mcp_server_added", "server", name)
	for _, row := range f.control.serverRows() {
		if row.Name == name {
			return added{status: http.StatusCreated, row: &row, name: name}
		}
	}
	return added{status: http.StatusCreated, name: name}
}

// appendServer adds entry after the last mcp_servers entry of a document,
// keeping the rest of it (comments included) as written, and answers the
// entry's index in mcp_servers.
func appendServer(doc []byte, entry config.MCPServer) ([]byte, int, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, 0, fmt.Errorf("the company file is not valid YAML: %w", err)
	}
	if root.Kind == 0 {
		root = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, 0, errors.New("the company file is not a mapping")
	}
	var entryNode yaml.Node
	if err := entryNode.Encode(entryYAML(entry)); err != nil {
		return nil, 0, err
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
		return nil, 0, errors.New("mcp_servers in the company file is not a list")
	}
	list.Style = 0
	list.Content = append(list.Content, &entryNode)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, 0, err
	}
	return out.Bytes(), len(list.Content) - 1, nil
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
	if e.CallTimeoutSeconds != 0 {
		add("call_timeout_seconds", e.CallTimeoutSeconds)
	}
	if e.Delivers != nil {
		add("delivers", *e.Delivers)
	}
	if e.Trust != "" {
		add("trust", e.Trust)
	}
	if e.Auth != "" {
		add("auth", e.Auth)
	}
	if e.OAuth != nil {
		add("oauth", e.OAuth)
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
