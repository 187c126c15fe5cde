package artifacts

import (
	"slices"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

// The kinds of artifact, and the file each one's URL opens unless its
// creator names another.
var kinds = map[string]string{
	"html":      "index.html",
	"doc":       "index.md",
	"slides":    "slides.md",
	"dashboard": "dashboard.json",
	"sheet":     "sheet.json",
}

var kindNames = []string{"html", "doc", "slides", "dashboard", "sheet"}

// artifact is one artifact's head as the projection holds it. Its
// versions, assets, history and datastore are rows of their own.
type artifact struct {
	ID          string         `json:"id"`
	Kind        string         `json:"kind"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Icon        string         `json:"icon,omitempty"`
	Main        string         `json:"main"`
	Owner       servers.Author `json:"owner"`
	Shares      []share        `json:"shares,omitempty"`
	// Assets says the artifact declared the assets capability: it has an
	// asset store upload_artifact_asset adds to.
	Assets bool `json:"assets,omitempty"`
	Head   int  `json:"head"`
	// Writers are everybody who wrote its title or description.
	Writers   []servers.Author `json:"writers"`
	Trashed   bool             `json:"trashed,omitempty"`
	TrashedBy string           `json:"trashed_by,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// share grants one role to a seat, a unit (unit:<key>) or the company.
type share struct {
	To   string                 `json:"to"`
	Role authority.ArtifactRole `json:"role"`
	By   string                 `json:"by"`
	At   time.Time              `json:"at"`
}

// version is one published version: its whole file manifest, not a diff,
// so any version is served or restored from its own row.
type version struct {
	N     int                `json:"n"`
	By    servers.Author     `json:"by"`
	At    time.Time          `json:"at"`
	Label string             `json:"label,omitempty"`
	Files map[string]fileRef `json:"files"`
	// Changed are the paths this version added, changed or removed
	// against the one before it.
	Changed      []string `json:"changed,omitempty"`
	RestoredFrom int      `json:"restored_from,omitempty"`
}

// fileRef is where a file's bytes are: a blob of the node's blob store,
// checked against its digest on every read. The bytes are never in the
// log or the projection, so a purge really deletes them.
type fileRef struct {
	Blob   string         `json:"blob"`
	Digest string         `json:"digest"`
	Size   int            `json:"size"`
	Type   string         `json:"type"`
	By     servers.Author `json:"by"` // who wrote these bytes
}

// historyRow is one thing that happened to an artifact, shown to its
// owner and editors: a version, a share, the trash, and every
// administrator's read through the admin path (ART-5).
type historyRow struct {
	At time.Time `json:"at"`
	By string    `json:"by"`
	// OperatorID is the credential the change came through, on the
	// operator surface (OPS-4).
	OperatorID string `json:"operator_id,omitempty"`
	What       string `json:"what"`
	Version    int    `json:"version,omitempty"`
}

// artifactResult is what the artifact projectors record in the op ledger.
type artifactResult struct {
	ID      string   `json:"id"`
	Version int      `json:"version,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Ref     string   `json:"ref,omitempty"`
	Removed bool     `json:"removed,omitempty"`
}

func (a *artifact) clone() *artifact {
	c := *a
	c.Shares = slices.Clone(a.Shares)
	c.Writers = slices.Clone(a.Writers)
	return &c
}

func (v *version) clone() *version {
	c := *v
	c.Files = make(map[string]fileRef, len(v.Files))
	for k, f := range v.Files {
		c.Files[k] = f
	}
	c.Changed = nil
	return &c
}

func addWriter(ws []servers.Author, a servers.Author) []servers.Author {
	if slices.Contains(ws, a) {
		return ws
	}
	return append(ws, a)
}
