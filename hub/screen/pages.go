package screen

import (
	"encoding/json"
	"net/http"
	"sort"
)

// toolsPage is the screen's main page: the servers, the catalogue and the
// add-server form.
type toolsPage struct {
	Admin   bool
	Servers []Server
	Nodes   []string
	Groups  []Group
	// Version is the change count the page was drawn at, so its event
	// stream says at once when something changed since.
	Version uint64
	Form    addForm
	// Held is how many third-party tools wait for a person's review.
	Held int
}

func (s *Screen) toolsPage(v *viewer) toolsPage {
	ver, _ := s.opts.Backend.Changes()
	d := toolsPage{Admin: v.Admin, Version: ver, Form: newAddForm(), Held: s.heldCount()}
	// Server rows show each configured launch, so they are for
	// administrators, as GET /mcp-servers is; others see the catalogue.
	var rows []Server
	if v.Admin {
		rows = s.opts.Backend.Servers()
		d.Servers, d.Nodes = rows, nodes(rows)
	}
	tools := s.opts.Backend.Tools()
	if !v.Admin {
		kept := tools[:0]
		for _, t := range tools {
			if !t.PerSeat {
				kept = append(kept, t)
			}
		}
		tools = kept
	}
	d.Groups = group(tools, rows)
	return d
}

func (s *Screen) serveTools(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	s.render(w, r, http.StatusOK, page{Title: "MCP Tools", Viewer: v, Body: "tools", Data: s.toolsPage(v)})
}

// serverPage is one server's own page.
type serverPage struct {
	Server  Server
	Tools   []Tool
	Version uint64
	// Grants are the seats of an auth: oauth server, each with where its
	// grant stands; CSRF goes on each seat's authorize link.
	Grants []SeatGrant
	CSRF   string
}

func (s *Screen) serveServer(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	name := r.PathValue("name")
	ver, _ := s.opts.Backend.Changes()
	for _, row := range s.opts.Backend.Servers() {
		if row.Name != name {
			continue
		}
		var tools []Tool
		for _, t := range s.opts.Backend.Tools() {
			if t.Source == "mcp:"+name {
				tools = append(tools, t)
			}
		}
		sort.SliceStable(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
		s.render(w, r, http.StatusOK, page{Title: "MCP server " + name, Viewer: v, Body: "server",
			Data: serverPage{Server: row, Tools: tools, Version: ver, Grants: s.seatGrants(name), CSRF: v.CSRF}})
		return
	}
	s.render(w, r, http.StatusNotFound, page{Title: "No such server", Viewer: v, Body: "notfound", Data: name})
}

// serveSecretNames lists the secret store's names for the form's $
// completion. Names only: a value never leaves the store this way.
func (s *Screen) serveSecretNames(w http.ResponseWriter, r *http.Request) {
	names := s.opts.Backend.SecretNames()
	if names == nil {
		names = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"names": names})
}
