package artifacts

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// How much of an artifact get_artifact answers at once.
const (
	versionsShown = 10
	maxVersions   = 50
	historyShown  = 50
)

// ---- get_artifact ----

type getIn struct {
	ID       string `json:"id" jsonschema:"the artifact's id (art_...)"`
	Version  int    `json:"version,omitempty" jsonschema:"a version to read; its head by default"`
	Path     string `json:"path,omitempty" jsonschema:"the file whose source to read a page of; the main file by default"`
	Offset   *int   `json:"offset,omitempty" jsonschema:"byte offset to read the file from (next_offset of the page before); passing it reads the text as written, page by page"`
	Versions int    `json:"versions,omitempty" jsonschema:"how many of the newest versions to list, 1 to 50; default 10"`
}

type artifactView struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	Icon        string    `json:"icon,omitempty"`
	Main        string    `json:"main"`
	Owner       string    `json:"owner"`
	Head        int       `json:"head"`
	Assets      bool      `json:"assets,omitempty"`
	URL         string    `json:"url"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type versionView struct {
	N            int       `json:"n"`
	By           string    `json:"by"`
	At           time.Time `json:"at"`
	Label        string    `json:"label,omitempty"`
	Changed      []string  `json:"changed,omitempty"`
	RestoredFrom int       `json:"restored_from,omitempty"`
	Files        int       `json:"files"`
}

type fileView struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Size   int    `json:"size"`
	Digest string `json:"digest"`
	By     string `json:"by"`
}

type filePage struct {
	Path    string `json:"path"`
	Version int    `json:"version"`
	Offset  int    `json:"offset"`
	Text    string `json:"text,omitempty"`
	// Condensed says Text is the whole file rewritten shorter by the
	// reader's auxiliary model, not a page of it as written.
	Condensed  bool   `json:"condensed,omitempty"`
	NextOffset int    `json:"next_offset,omitempty"`
	Note       string `json:"note,omitempty"`
}

type shareView struct {
	To   string `json:"to"`
	Role string `json:"role"`
}

type getOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Artifact   artifactView       `json:"artifact"`
	// Role is what this call acts as on the artifact, and Writer whether
	// it may publish a version.
	Role            string        `json:"role"`
	Writer          bool          `json:"writer"`
	Versions        []versionView `json:"versions"`
	VersionsOmitted int           `json:"versions_omitted,omitempty"`
	Files           []fileView    `json:"files"`
	File            *filePage     `json:"file,omitempty"`
	Shares          []shareView   `json:"shares,omitempty"`
	History         []historyRow  `json:"history,omitempty"`
	Room            []Presence    `json:"room,omitempty"`
}

// readable is an artifact a read may show: the caller's decision on it,
// the elevated-read record written first on the admin path, and the
// trash refused (ART-4, ART-5).
func (s *srv) readable(ctx context.Context, c authority.Caller, id, tool, what string) (*artifact, access, error) {
	var art *artifact
	var acc access
	err := s.w.View(func(r pebble.Reader) error {
		var err error
		if art, err = readArtifact(r, id); err != nil {
			return err
		}
		if acc, err = s.decide(c, art, id, authority.VerbRead); err != nil {
			return err
		}
		return trashed(art)
	})
	if err != nil {
		return nil, acc, err
	}
	if err := s.show(ctx, c, acc, art.ID, tool, what); err != nil {
		return nil, acc, err
	}
	return art, acc, nil
}

func (s *srv) getArtifact(ctx context.Context, c authority.Caller, in getIn) (getOut, error) {
	n := in.Versions
	if n == 0 {
		n = versionsShown
	}
	if n < 1 || n > maxVersions {
		return getOut{}, authority.Refuse(authority.Invalid, "versions %d is outside 1 to %d.", in.Versions, maxVersions).WithData("argument", "versions")
	}
	art, acc, err := s.readable(ctx, c, in.ID, "get_artifact", "")
	if err != nil {
		return getOut{}, err
	}
	e := envelope()
	out := getOut{Role: acc.Role.String()}
	if acc.AdminPath {
		out.Role = "administrator (admin path)"
	}
	var ver *version
	err = s.w.View(func(r pebble.Reader) error {
		if pub, err := s.decide(c, art, art.ID, authority.VerbPublish); err == nil && pub.Allowed() {
			out.Writer = true
		}
		out.Artifact = artifactView{ID: art.ID, Kind: art.Kind, Title: e.Fence(art.Title, art.Writers), Description: e.Fence(art.Description, art.Writers),
			Icon: art.Icon, Main: art.Main, Owner: art.Owner.Seat, Head: art.Head, Assets: art.Assets, URL: s.url(art.ID), CreatedAt: art.CreatedAt, UpdatedAt: art.UpdatedAt}
		want := art.Head
		if in.Version != 0 {
			want = in.Version
		}
		var err error
		if ver, err = readVersion(r, art.ID, want); err != nil {
			return err
		}
		if ver == nil {
			return authority.Refuse(authority.Invalid, "version %d is no version of %s (it is at %d).", in.Version, art.ID, art.Head).WithData("argument", "version")
		}
		for v := art.Head; v >= 1 && len(out.Versions) < n; v-- {
			vv, err := readVersion(r, art.ID, v)
			if err != nil {
				return err
			}
			out.Versions = append(out.Versions, versionView{N: vv.N, By: vv.By.Seat, At: vv.At, Label: vv.Label, Changed: vv.Changed, RestoredFrom: vv.RestoredFrom, Files: len(vv.Files)})
		}
		out.VersionsOmitted = art.Head - len(out.Versions)
		// Who holds it and what happened to it are for those who manage
		// it: its owner and editors.
		if acc.Role >= authority.RoleEditor || acc.AdminPath {
			for _, sh := range art.Shares {
				out.Shares = append(out.Shares, shareView{To: sh.To, Role: sh.Role.String()})
			}
			if out.History, err = history(r, art.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return getOut{}, err
	}
	paths := make([]string, 0, len(ver.Files))
	for p := range ver.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out.Files = make([]fileView, 0, len(paths))
	for _, p := range paths {
		f := ver.Files[p]
		out.Files = append(out.Files, fileView{Path: p, Type: f.Type, Size: f.Size, Digest: f.Digest, By: f.By.Seat})
	}
	if out.File, err = s.filePage(ctx, c, e, art, ver, in.Path, in.Offset); err != nil {
		return getOut{}, err
	}
	out.Provenance = e.Provenance()
	if room, err := s.room(ctx, art.ID); err == nil {
		out.Room = room
	}
	focus := fmt.Sprintf("version %d", ver.N)
	if in.Path != "" {
		focus += " " + in.Path
	}
	s.enter(ctx, c, art.ID, viewing, focus)
	return out, nil
}

// filePage is one page of one file's source. Text another principal wrote
// is fenced as theirs. A long file read without an offset is condensed by
// the reader's auxiliary model, labelled so; where none can condense it,
// the answer is its first page and says why and to read on with offset.
// Either way it is never cut silently (OUT-2).
func (s *srv) filePage(ctx context.Context, c authority.Caller, e *servers.Envelope, art *artifact, ver *version, p string, offset *int) (*filePage, error) {
	if p == "" {
		p = art.Main
	}
	f, ok := ver.Files[p]
	if !ok {
		if p == art.Main {
			return nil, nil // a version without its main file has no page to show
		}
		return nil, authority.Refuse(authority.Invalid, "path %s is no file of version %d.", p, ver.N).WithData("argument", "path")
	}
	fp := &filePage{Path: p, Version: ver.N}
	if !isText(f) {
		fp.Note = fmt.Sprintf("%s is %s, %d bytes; its bytes are served at the artifact's url.", p, f.Type, f.Size)
		return fp, nil
	}
	data, err := s.readFile(ctx, f)
	if err != nil {
		return nil, err
	}
	if offset != nil {
		fp.Offset = *offset
	}
	if fp.Offset < 0 || fp.Offset > len(data) {
		return nil, authority.Refuse(authority.Invalid, "offset %d is outside the file's %d bytes.", fp.Offset, len(data)).WithData("argument", "offset")
	}
	if fp.Offset < len(data) && !utf8.RuneStart(data[fp.Offset]) {
		return nil, authority.Refuse(authority.Invalid, "offset %d falls inside a character; next_offset always lands on a whole one.", fp.Offset).WithData("argument", "offset")
	}
	text, next := page(data, fp.Offset, pageBytes)
	what, why := "", "no model here condenses it"
	if next > 0 && offset == nil && s.d.Condense != nil {
		short, model, err := s.d.Condense(ctx, c, string(data), pageBytes)
		if err == nil {
			text, next, what = short, 0, "condensed"
			fp.Condensed = true
			fp.Note = fmt.Sprintf("%s is %d bytes, more than one page: this is all of it condensed by %s, your seat's auxiliary model. Pass offset 0 to read it as written, page by page.", p, len(data), model)
		} else {
			why = "it could not be condensed: " + refusalWords(err)
		}
	}
	if f.By.Seat != c.Seat {
		fp.Text = e.FenceAs(what, text, []servers.Author{f.By})
	} else {
		fp.Text = text
	}
	fp.NextOffset = next
	switch {
	case next > 0 && offset == nil:
		fp.Note = fmt.Sprintf("%s is %d bytes and this is its first page; %s. Read on with offset %d.", p, len(data), why, next)
	case next > 0:
		fp.Note = fmt.Sprintf("One page of %s's %d bytes; read on with offset %d.", p, len(data), next)
	}
	return fp, nil
}

// refusalWords is why a call failed, in the words a refusal gives it,
// to go inside a sentence.
func refusalWords(err error) string {
	var r *authority.Refusal
	w := err.Error()
	if errors.As(err, &r) {
		w = r.Sentence
	}
	return strings.TrimSuffix(w, ".")
}

// history is an artifact's newest history rows, oldest of them first.
func history(r pebble.Reader, id string) ([]historyRow, error) {
	var all []historyRow
	err := each(r, kHistory+id+"/", "", func(k, v []byte) (bool, error) {
		var h historyRow
		if err := state.DecodeJSON(k, v, &h); err != nil {
			return false, err
		}
		all = append(all, h)
		return true, nil
	})
	if len(all) > historyShown {
		all = all[len(all)-historyShown:]
	}
	return all, err
}

// ---- list_artifacts ----

type listIn struct {
	Scope string `json:"scope,omitempty" jsonschema:"mine (you own), shared (shared with you or your unit), company (shared with the company), agents (made by agent seats) or all (the default)"`
	Kind  string `json:"kind,omitempty" jsonschema:"only artifacts of this kind"`
	Query string `json:"query,omitempty" jsonschema:"only artifacts whose title or description holds these words (any case)"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many, 1 to 200; default 50"`
	After string `json:"after,omitempty" jsonschema:"next_after from the previous page"`
}

type listRow struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Title     string    `json:"title"`
	Owner     string    `json:"owner"`
	Role      string    `json:"role"`
	Head      int       `json:"head"`
	UpdatedAt time.Time `json:"updated_at"`
	URL       string    `json:"url"`
}

type listOut struct {
	Provenance servers.Provenance `json:"provenance"`
	Artifacts  []listRow          `json:"artifacts"`
	NextAfter  string             `json:"next_after,omitempty"`
}

var scopes = []string{"mine", "shared", "company", "agents", "all"}

// listArtifacts lists what the caller can open — decided for the seat and
// for whom its turn acts, like every read. The admin path is for reading
// one artifact and is recorded; it lists nothing. The trash is the
// dashboard's, and is left out.
func (s *srv) listArtifacts(_ context.Context, c authority.Caller, in listIn) (listOut, error) {
	scope := in.Scope
	if scope == "" {
		scope = "all"
	}
	if !contains(scopes, scope) {
		return listOut{}, authority.Refuse(authority.Invalid, "scope %q is not one of %s.", in.Scope, strings.Join(scopes, ", ")).WithData("argument", "scope")
	}
	if _, ok := kinds[in.Kind]; in.Kind != "" && !ok {
		return listOut{}, authority.Refuse(authority.Invalid, "kind %q is not one of %s.", in.Kind, strings.Join(kindNames, ", ")).WithData("argument", "kind")
	}
	limit, err := servers.PageLimit(in.Limit, 50, 200)
	if err != nil {
		return listOut{}, err
	}
	if err := s.checkRequester(c); err != nil {
		return listOut{}, err
	}
	words := strings.ToLower(strings.TrimSpace(in.Query))
	out := listOut{Artifacts: []listRow{}}
	e := envelope()
	err = s.w.View(func(r pebble.Reader) error {
		return each(r, kArtifact, in.After, func(k, v []byte) (bool, error) {
			var a artifact
			if err := state.DecodeJSON(k, v, &a); err != nil {
				return false, err
			}
			if a.Trashed || (in.Kind != "" && a.Kind != in.Kind) {
				return true, nil
			}
			if words != "" && !strings.Contains(strings.ToLower(a.Title+"\n"+a.Description), words) {
				return true, nil
			}
			acc, err := s.decide(c, &a, a.ID, authority.VerbRead)
			if err != nil || acc.AdminPath || !s.inScope(c, &a, scope) {
				return true, nil
			}
			if len(out.Artifacts) == limit {
				out.NextAfter = out.Artifacts[limit-1].ID
				return false, nil
			}
			out.Artifacts = append(out.Artifacts, listRow{ID: a.ID, Kind: a.Kind, Title: e.Fence(a.Title, a.Writers), Owner: a.Owner.Seat, Role: acc.Role.String(),
				Head: a.Head, UpdatedAt: a.UpdatedAt, URL: s.url(a.ID)})
			return true, nil
		})
	})
	out.Provenance = e.Provenance()
	return out, err
}

// inScope reports whether an artifact the caller can open is in scope.
func (s *srv) inScope(c authority.Caller, a *artifact, scope string) bool {
	switch scope {
	case "mine":
		return strings.EqualFold(a.Owner.Seat, c.Seat)
	case "shared":
		// Shared with the caller or a unit of theirs, not just with
		// everybody.
		if strings.EqualFold(a.Owner.Seat, c.Seat) {
			return false
		}
		direct := *a
		direct.Shares = nil
		for _, sh := range a.Shares {
			if sh.To != "company" {
				direct.Shares = append(direct.Shares, sh)
			}
		}
		return s.roleOf(&direct, c.Seat) > authority.RoleNone
	case "company":
		for _, sh := range a.Shares {
			if sh.To == "company" {
				return true
			}
		}
		return false
	case "agents":
		return a.Owner.Kind == authority.KindAgent
	}
	return true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
