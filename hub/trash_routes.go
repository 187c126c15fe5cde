package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/knowledge-mcp"
)

// The dashboard's trash (ART-4): a person puts a page or an artifact in
// it, lists what they may take out, and purges or transfers an artifact.
// These are routes, not tools: no seat is offered any of them, and the
// operator catalogue keeps its count, serving only the pages' list_trash
// and restore_from_trash. Each route acts as the person (or credential)
// whose token the request carries, decided by the store's own authority:
// the artifact table's rows for an artifact, the knowledge base's rules
// for a page.

// ArtifactDecisions are a person's decisions about an artifact as a whole:
// *artifacts.Store makes them.
type ArtifactDecisions interface {
	Trash(ctx context.Context, c authority.Caller, id string) error
	Restore(ctx context.Context, c authority.Caller, id string) error
	Purge(ctx context.Context, c authority.Caller, id, reason string) error
	Transfer(ctx context.Context, c authority.Caller, id, to string) error
	TrashOf(ctx context.Context, c authority.Caller) ([]artifacts.Trashed, int, error)
}

// PageTrash is a person's trash of pages: *knowledge.Store keeps it.
type PageTrash interface {
	Trash(ctx context.Context, c authority.Caller, id string) (knowledge.Trashed, error)
	TrashOf(ctx context.Context, c authority.Caller) ([]knowledge.TrashRow, int, error)
}

// maxTrashBody bounds a decision's JSON body: a handle or a one-line
// reason.
const maxTrashBody = 16 << 10

func (f *operator) registerTrash(mux *http.ServeMux) {
	route := func(pattern string, fn http.HandlerFunc) { mux.Handle(pattern, f.guard(f.authenticate(fn))) }
	route("GET /trash", f.serveTrash)
	route("DELETE /artifacts/{id}", f.artifactDecision(func(ctx context.Context, d ArtifactDecisions, c authority.Caller, id string, _ trashBody) error {
		return d.Trash(ctx, c, id)
	}))
	route("POST /artifacts/{id}/restore", f.artifactDecision(func(ctx context.Context, d ArtifactDecisions, c authority.Caller, id string, _ trashBody) error {
		return d.Restore(ctx, c, id)
	}))
	route("POST /artifacts/{id}/purge", f.artifactDecision(func(ctx context.Context, d ArtifactDecisions, c authority.Caller, id string, b trashBody) error {
		return d.Purge(ctx, c, id, b.Reason)
	}))
	route("POST /artifacts/{id}/transfer", f.artifactDecision(func(ctx context.Context, d ArtifactDecisions, c authority.Caller, id string, b trashBody) error {
		if b.To == "" {
			return authority.Refuse(authority.Invalid, "to is required: the handle of the seat the artifact is transferred to.").WithData("argument", "to")
		}
		return d.Transfer(ctx, c, id, b.To)
	}))
	route("DELETE /knowledge/pages/{id}", f.serveTrashPage)
}

// trashBody is what a decision may carry: a purge's reason, a transfer's
// new owner.
type trashBody struct {
	Reason string `json:"reason,omitempty"`
	To     string `json:"to,omitempty"`
}

// artifactDecision serves one of a person's decisions about an artifact.
func (f *operator) artifactDecision(decide func(context.Context, ArtifactDecisions, authority.Caller, string, trashBody) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := principalFrom(r.Context())
		d := f.opts.artifactFiles
		if d == nil || !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"class": string(authority.NotFound), "error": "this hub node serves no artifacts"})
			return
		}
		var body trashBody
		if err := readTrashBody(w, r, &body); err != nil {
			f.writeRefusal(w, err, "artifact_decision_failed")
			return
		}
		id := r.PathValue("id")
		if err := decide(r.Context(), d, p.Caller(), id, body); err != nil {
			f.writeRefusal(w, err, "artifact_decision_failed")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": id, "outcome": "applied"})
	}
}

// readTrashBody reads an optional JSON body, refusing one it cannot read
// as the caller's fault.
func readTrashBody(w http.ResponseWriter, r *http.Request, into *trashBody) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTrashBody))
	if err != nil {
		return authority.Refuse(authority.Invalid, "The body is over %d bytes; it carries at most a reason or a handle.", maxTrashBody)
	}
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return authority.Refuse(authority.Invalid, "The body is not a JSON object of reason and to: %s.", err.Error())
	}
	return nil
}

// serveTrashPage puts a page in the trash. It is served only where the
// node serves restore_from_trash, so nothing goes in that nobody here can
// take out.
func (f *operator) serveTrashPage(w http.ResponseWriter, r *http.Request) {
	p, ok := principalFrom(r.Context())
	pages := f.pages()
	if pages == nil || !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"class": string(authority.NotFound), "error": "this hub node runs no native knowledge base"})
		return
	}
	out, err := pages.Trash(r.Context(), p.Caller(), r.PathValue("id"))
	if err != nil {
		f.writeRefusal(w, err, "page_trash_failed")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// pages is the page trash where the native knowledge base is served now.
func (f *operator) pages() PageTrash {
	if f.opts.pageTrash == nil {
		return nil
	}
	if _, ok := f.company.Get("restore_from_trash"); !ok {
		return nil
	}
	return f.opts.pageTrash
}

// trashOut is a person's trash: what they may take out.
type trashOut struct {
	Artifacts     []artifacts.Trashed  `json:"artifacts"`
	ArtifactsMore int                  `json:"artifacts_more,omitempty"`
	Pages         []knowledge.TrashRow `json:"pages"`
	PagesMore     int                  `json:"pages_more,omitempty"`
}

// serveTrash lists the caller's trash: the artifacts they may restore
// (their own; every one for an administrator) and the pages, as
// list_trash lists them.
func (f *operator) serveTrash(w http.ResponseWriter, r *http.Request) {
	p, ok := principalFrom(r.Context())
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"class": string(authority.Forbidden), "error": "no credential"})
		return
	}
	c := p.Caller()
	out := trashOut{Artifacts: []artifacts.Trashed{}, Pages: []knowledge.TrashRow{}}
	var err error
	if d := f.opts.artifactFiles; d != nil {
		out.Artifacts, out.ArtifactsMore, err = d.TrashOf(r.Context(), c)
	}
	if pages := f.pages(); pages != nil && err == nil {
		out.Pages, out.PagesMore, err = pages.TrashOf(r.Context(), c)
	}
	if err != nil {
		f.writeRefusal(w, err, "trash_list_failed")
		return
	}
	writeJSON(w, http.StatusOK, out)
}
