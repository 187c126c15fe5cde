package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"sort"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
)

// toolRow is one row of GET /tools (CAT-2).
type toolRow struct {
	Name        string        `json:"name"`
	Source      Source        `json:"source"`
	Description string        `json:"description"`
	Annotations servers.Hints `json:"annotations"`
	Delivers    string        `json:"delivers"`
	ArgCount    int           `json:"arg_count"`
	// Quarantined marks a tool held until a person approves it (issue
	// 28): listed here, offered to nobody; Quarantine says why.
	Quarantined bool        `json:"quarantined,omitempty"`
	Quarantine  *Quarantine `json:"quarantine,omitempty"`
}

func (f *operator) serveTools(w http.ResponseWriter, r *http.Request) {
	// The whole company catalogue, held tools with the rest: what a
	// registry offers leaves them out.
	entries := f.company.Entries()
	rows := make([]toolRow, 0, len(entries))
	counts := map[Source]int{}
	for _, e := range entries {
		rows = append(rows, toolRow{Name: e.Name, Source: e.Source, Description: e.Description,
			Annotations: e.Hints, Delivers: e.Delivers, ArgCount: e.ArgCount(), Quarantined: e.Quarantine != nil, Quarantine: e.Quarantine})
		counts[e.Source]++
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Source != rows[j].Source {
			return rows[i].Source < rows[j].Source
		}
		return rows[i].Name < rows[j].Name
	})
	writeJSON(w, http.StatusOK, map[string]any{"tools": rows, "sources": counts})
}

func (f *operator) serveReload(w http.ResponseWriter, r *http.Request) {
	if err := f.control.Reload(); err != nil {
		f.log.Error("config_reload_failed", "error", err.Error())
		// Only a document the check refused is the caller's to fix; a store
		// or file that could not be read is the node's own fault (REF-4).
		var v config.Violations
		if errors.As(err, &v) {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"class": string(authority.Invalid), "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"class": string(authority.InternalError), "error": authority.InternalErrorSentence})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "applied"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (f *operator) serveMCPServers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"servers": f.control.serverRows()})
}

// serveMCPServer is a server's own page: its row, each node's full reason,
// and its tools, or that it registered none and why.
func (f *operator) serveMCPServer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	for _, row := range f.control.serverRows() {
		if row.Name != name {
			continue
		}
		var tools []toolRow
		seen := map[string]bool{}
		for _, cat := range append([]*Catalogue{f.company}, f.control.seatCatalogues()...) {
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

// runtimeRow is GET /debug/runtime: what a soak or an operator watching a
// long-running node needs to tell growth from load, and what a load run
// needs to say what a call costs in allocations. The process's RSS, files
// and children are the operating system's to tell.
type runtimeRow struct {
	Goroutines       int    `json:"goroutines"`
	HeapAllocBytes   uint64 `json:"heap_alloc_bytes"`
	HeapSysBytes     uint64 `json:"heap_sys_bytes"`
	GCCycles         uint32 `json:"gc_cycles"`
	OperatorSessions int    `json:"operator_sessions"`
	// Mallocs and TotalAllocBytes only grow: the difference between two
	// readings is what was allocated between them.
	Mallocs         uint64 `json:"mallocs"`
	TotalAllocBytes uint64 `json:"total_alloc_bytes"`
	// HeapInuseBytes and StackInuseBytes, read after ?gc=1, are the live
	// memory the node holds: what a thousand idle sessions cost.
	HeapInuseBytes  uint64 `json:"heap_inuse_bytes"`
	StackInuseBytes uint64 `json:"stack_inuse_bytes"`
}

func (f *operator) serveRuntime(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("gc") == "1" {
		// An administrator's request for live memory rather than live
		// memory plus whatever garbage the GC target lets accumulate;
		// what is freed is returned to the system, so the resident set
		// read next says the same. Twice: a collection only moves what
		// sync.Pools cache (the HTTP server's buffers, after a burst of
		// calls) aside, and the next one frees it, so a reading after
		// load is not a pool's worth higher than one after a quiet start.
		debug.FreeOSMemory()
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	row := runtimeRow{Goroutines: runtime.NumGoroutine(), HeapAllocBytes: ms.HeapAlloc, HeapSysBytes: ms.HeapSys, GCCycles: ms.NumGC,
		Mallocs: ms.Mallocs, TotalAllocBytes: ms.TotalAlloc, HeapInuseBytes: ms.HeapInuse, StackInuseBytes: ms.StackInuse}
	for range f.server.Sessions() {
		row.OperatorSessions++
	}
	writeJSON(w, http.StatusOK, row)
}
