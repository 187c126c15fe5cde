package screen

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/crewlet/hub/hub/config"
)

// addForm is the Add an MCP server form, as drawn and as sent back.
type addForm struct {
	Name       string
	Transport  string // stdio or http
	Command    string
	Args       string // one per line
	URL        string
	Reach      string // shared or per-seat
	Trust      string // pinned or auto
	ToolPrefix string
	Env        []pair
	Headers    []pair
	// Violations are everything wrong with what was sent, all at once.
	Violations []string
}

// pair is one environment variable or header: its value a ${NAME}
// pointer into the secret store, or a literal that is not a secret.
type pair struct{ Name, Value string }

// blankRows is how many empty rows of each kind a fresh form offers; the
// script adds more.
const blankRows = 2

func newAddForm() addForm {
	f := addForm{Transport: "stdio", Reach: "shared", Trust: config.TrustPinned}
	f.pad()
	return f
}

// pad leaves at least one empty row of each kind to write in.
func (f *addForm) pad() {
	for len(f.Env) < blankRows || f.Env[len(f.Env)-1] != (pair{}) {
		f.Env = append(f.Env, pair{})
	}
	for len(f.Headers) < blankRows || f.Headers[len(f.Headers)-1] != (pair{}) {
		f.Headers = append(f.Headers, pair{})
	}
}

// readAddForm reads the form and what is wrong with it on its own terms:
// rows that say half a thing, or one name twice. What the company would
// refuse is the hub's to say.
func readAddForm(r *http.Request) (addForm, config.MCPServer, []string) {
	f := addForm{
		Name:       strings.TrimSpace(r.PostFormValue("name")),
		Transport:  r.PostFormValue("transport"),
		Command:    strings.TrimSpace(r.PostFormValue("command")),
		Args:       r.PostFormValue("args"),
		URL:        strings.TrimSpace(r.PostFormValue("url")),
		Reach:      r.PostFormValue("reach"),
		Trust:      r.PostFormValue("trust"),
		ToolPrefix: strings.TrimSpace(r.PostFormValue("tool_prefix")),
	}
	var bad []string
	if f.Transport != "http" {
		f.Transport = "stdio"
	}
	if f.Reach != "per-seat" {
		f.Reach = "shared"
	}
	// Anything but auto is pinned: a form that says nothing holds the
	// server's tools for review, as the company file does.
	if f.Trust != config.TrustAuto {
		f.Trust = config.TrustPinned
	}
	e := config.MCPServer{Name: f.Name, ToolPrefix: f.ToolPrefix, Trust: f.Trust}
	if f.Transport == "http" {
		e.Transport, e.URL = "http", f.URL
	} else {
		e.Command = f.Command
		for _, a := range strings.Split(strings.ReplaceAll(f.Args, "\r\n", "\n"), "\n") {
			if strings.TrimSpace(a) != "" {
				e.Args = append(e.Args, a)
			}
		}
	}
	if f.Reach == "per-seat" {
		no := false
		e.Shared = &no
	}
	rows := func(kind, label string) ([]pair, map[string]string) {
		names, values := r.PostForm[kind+"_name"], r.PostForm[kind+"_value"]
		var out []pair
		m := map[string]string{}
		for i := range max(len(names), len(values)) {
			var p pair
			if i < len(names) {
				p.Name = strings.TrimSpace(names[i])
			}
			if i < len(values) {
				p.Value = values[i]
			}
			if p == (pair{}) {
				continue
			}
			out = append(out, p)
			switch _, twice := m[p.Name]; {
			case p.Name == "":
				bad = append(bad, fmt.Sprintf("%s row %d has a value but no name.", label, len(out)))
			case twice:
				bad = append(bad, fmt.Sprintf("%s %s is given twice.", label, p.Name))
			default:
				m[p.Name] = p.Value
			}
		}
		if len(m) == 0 {
			m = nil
		}
		return out, m
	}
	f.Env, e.Env = rows("env", "Environment variable")
	f.Headers, e.Headers = rows("header", "Header")
	if f.Transport == "http" && len(f.Env) > 0 {
		bad = append(bad, "An http server is not started by the hub, so it takes no environment; send what it needs as headers.")
	}
	if f.Transport == "stdio" && len(f.Headers) > 0 {
		bad = append(bad, "A stdio server is spoken to over its standard input, so it takes no headers; give it what it needs as environment variables.")
	}
	return f, e, bad
}

// serveAdd makes the same create-only write as PUT
// /config/mcp-servers/{name}. Every violation is answered at once: the
// form's own, and the company's with the server in it, which the hub
// checks without writing when the form already has something wrong. A
// server written is answered in its first state (state, reason, tools),
// since a write that took can still leave a server that will not start or
// whose tools are refused. The script sends it as fetch and shows the
// answer in place; without the script, the page is drawn again with the
// violations, or the new server's page follows.
func (s *Screen) serveAdd(w http.ResponseWriter, r *http.Request) {
	f, entry, bad := readAddForm(r)
	res := s.opts.Backend.AddServer(r.Context(), entry, len(bad) == 0)
	f.Violations = append(bad, formViolations(res.Entry, res.Violations)...)
	if len(res.Violations) == 0 && res.Error != "" && res.Status >= 300 {
		f.Violations = append(f.Violations, res.Error)
	}
	status := res.Status
	if len(bad) > 0 && status < 300 {
		status = http.StatusUnprocessableEntity
	}
	href := Base + "/servers/" + entry.Name
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		body := map[string]any{"violations": f.Violations}
		if status == http.StatusCreated {
			body = map[string]any{"added": entry.Name, "href": href}
			if row := res.Server; row != nil {
				body["state"], body["tools"] = row.State, row.ToolCount()
				if n := row.Reason(); n != nil {
					body["reason"] = n.Text
				}
			}
		}
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	if status == http.StatusCreated {
		http.Redirect(w, r, href, http.StatusSeeOther)
		return
	}
	v := viewerOf(r)
	d := s.toolsPage(v)
	f.pad()
	d.Form = f
	s.render(w, r, status, page{Title: "MCP Tools", Viewer: v, Body: "tools", Data: d})
}

// formLabels are the form's fields by the key of the entry they write:
// a violation about the new entry names the field a person filled in, not
// a path into a file they never saw (mcp_servers[3].name).
var formLabels = map[string]string{
	"name":        "Name",
	"transport":   "How the hub reaches it",
	"command":     "Command",
	"args":        "Arguments",
	"url":         "Address",
	"shared":      "Who it serves",
	"trust":       "Its tools",
	"tool_prefix": "Tool prefix",
	"env":         "Environment",
	"headers":     "Headers",
}

// formViolations rewrites the company's violations about the new entry
// (those that begin with entry, its path) to name the form's field: the
// entry itself is the server the form describes, env.KEY is that
// environment variable, args[i] its argument line. A violation about
// anything else, or a key the form has no field for, is kept as written.
func formViolations(entry string, violations []string) []string {
	if entry == "" {
		return violations
	}
	out := make([]string, 0, len(violations))
	for _, v := range violations {
		out = append(out, formViolation(entry, v))
	}
	return out
}

func formViolation(entry, v string) string {
	rest, ok := strings.CutPrefix(v, entry)
	if !ok {
		return v
	}
	if msg, ok := strings.CutPrefix(rest, ": "); ok {
		// About the server as a whole: the message alone says it.
		return strings.ToUpper(msg[:1]) + msg[1:]
	}
	field, ok := strings.CutPrefix(rest, ".")
	if !ok {
		return v
	}
	path, msg, ok := strings.Cut(field, ": ")
	if !ok {
		return v
	}
	key, sub, _ := strings.Cut(path, ".")
	label := ""
	switch base, idx, indexed := strings.Cut(key, "["); {
	case indexed && base == "args":
		n, err := strconv.Atoi(strings.TrimSuffix(idx, "]"))
		if err != nil {
			return v
		}
		label = fmt.Sprintf("Arguments, line %d", n+1)
	case key == "env" && sub != "":
		label = "Environment variable " + sub
	case key == "headers" && sub != "":
		label = "Header " + sub
	case sub == "":
		label = formLabels[key]
	}
	if label == "" {
		return v
	}
	if strings.HasPrefix(msg, "is ") {
		return label + " " + msg
	}
	return label + ": " + msg
}

// pairRow is one environment or header row of the form, as drawn.
type pairRow struct {
	Kind, Label   string
	Index, Number int
	Pair          pair
}

func pairOf(kind, label string, i int, p pair) pairRow {
	return pairRow{Kind: kind, Label: label, Index: i, Number: i + 1, Pair: p}
}

// launchPairs is a server's configured environment or headers, by name.
type launchPairs struct {
	Title string
	Rows  []pair
}

func pairsOf(title string, m map[string]string) launchPairs {
	out := launchPairs{Title: title}
	for k, v := range m {
		out.Rows = append(out.Rows, pair{k, v})
	}
	sort.Slice(out.Rows, func(i, j int) bool { return out.Rows[i].Name < out.Rows[j].Name })
	return out
}
