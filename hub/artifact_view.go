package hub

import (
	"context"
	"net/http"
	"strconv"

	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
)

// ArtifactFiles reads one file of an artifact's current version for a
// caller, decided by the artifact store's own authority (ART-2, ART-4,
// ART-5), and makes a person's decisions about an artifact for the
// dashboard's trash routes (trash_routes.go): *artifacts.Store is one.
type ArtifactFiles interface {
	Open(ctx context.Context, c authority.Caller, id, path string) (artifacts.File, error)
	ArtifactDecisions
}

// artifactCSP is the content security policy every artifact page is
// served under. An artifact is somebody's page served from the hub's own
// origin, so it must not be able to act as the hub's client: sandbox
// gives it an opaque origin (no same-origin reads, no storage of the
// hub's), connect-src and form-action keep its scripts and forms from
// reaching any URL, the API included, and frame-ancestors lets only the
// hub's own dashboard frame it. Its own files, inline styles and scripts
// still run.
const artifactCSP = "sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox; " +
	"default-src 'self' data: blob:; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; font-src 'self' data:; media-src 'self' data: blob:; " +
	"connect-src 'none'; form-action 'none'; base-uri 'none'; object-src 'none'; frame-ancestors 'self'"

// serveArtifact serves one file of an artifact's current version, its main
// file at the bare URL, to the person (or credential) whose token the
// request carries: no relation answers 404 exactly as an id nothing holds.
func (f *operator) serveArtifact(w http.ResponseWriter, r *http.Request) {
	files := f.opts.artifactFiles
	p, ok := principalFrom(r.Context())
	if files == nil || !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"class": string(authority.NotFound), "error": "this hub node serves no artifacts"})
		return
	}
	file, err := files.Open(r.Context(), p.Caller(), r.PathValue("id"), r.PathValue("path"))
	if err != nil {
		f.writeRefusal(w, err, "artifact_file_failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", file.Type)
	h.Set("Content-Length", strconv.Itoa(len(file.Data)))
	h.Set("Content-Security-Policy", artifactCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// Answered for one credential: no shared cache may keep it.
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(file.Data)
	}
}
