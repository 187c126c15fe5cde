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
	"github.com/crewlet/hub/hub/atomicfile"
	"github.com/crewlet/hub/hub/config"
	"gopkg.in/yaml.v3"
)

// servePutMCPServer adds a server to the company file (OPS-7). It creates
// only: If-None-Match: * is required and a configured name is refused. The
// whole company is checked with the server in it before anything is
// written, every violation answered at once; the server goes after every
// server already declared, and the revision is applied.
func (f *operator) servePutMCPServer(w http.ResponseWriter, r *http.Request) {
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
	path := f.opts.ConfigFile
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
		f.log.Error("config_read_failed", "error", err.Error())
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
	// Names the servers already listed must not collide under it either
	// (CAT-12): refused before the file is touched.
	if err := f.control.check(c); errors.As(err, &v) {
		fail(http.StatusUnprocessableEntity, authority.Invalid, "the company would not be valid with this server", "violations", []string(v))
		return
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, next, mode); err != nil {
		f.log.Error("config_write_failed", "error", err.Error())
		fail(http.StatusInternalServerError, authority.InternalError, authority.InternalErrorSentence)
		return
	}
	if err := f.control.Apply(c); err != nil {
		fail(http.StatusUnprocessableEntity, authority.Invalid, "written, but the revision was not applied: "+err.Error())
		return
	}
	f.log.Info("mcp_server_added", "server", name)
	for _, row := range f.control.serverRows() {
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
	if e.CallTimeoutSeconds != 0 {
		add("call_timeout_seconds", e.CallTimeoutSeconds)
	}
	if e.Delivers != nil {
		add("delivers", *e.Delivers)
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
