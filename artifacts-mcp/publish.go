package artifacts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- publish_artifact ----

type editIn struct {
	Path   string `json:"path,omitempty" jsonschema:"the file to edit; the main file by default"`
	OldStr string `json:"old_str" jsonschema:"text that occurs exactly once in the file as it is at base_version"`
	NewStr string `json:"new_str" jsonschema:"what replaces it"`
}

type publishIn struct {
	ID             string             `json:"id" jsonschema:"the artifact's id (art_...)"`
	BaseVersion    int                `json:"base_version" jsonschema:"the version you read and change (get_artifact's head); a publish over a newer one is refused"`
	Edits          []editIn           `json:"edits,omitempty" jsonschema:"exact replacements in files of the base version, in order"`
	Content        string             `json:"content,omitempty" jsonschema:"the main file's whole new text"`
	Files          map[string]*fileIn `json:"files,omitempty" jsonschema:"files to add or replace by path; null removes one"`
	Source         *sourceIn          `json:"source,omitempty" jsonschema:"a build's whole source: its files become the version, and files it lacks are removed"`
	RestoreVersion int                `json:"restore_version,omitempty" jsonschema:"publish an earlier version's files again as the new version"`
	Label          string             `json:"label,omitempty" jsonschema:"a label for the new version"`
	servers.OpIDArg
}

type publishPayload struct {
	ID   string `json:"id"`
	Base int    `json:"base"`
	// Files are the changes: a path to its new bytes, or null to remove
	// it. Whole: they are the whole version instead.
	Files   map[string]*fileRef `json:"files,omitempty"`
	Whole   bool                `json:"whole,omitempty"`
	Restore int                 `json:"restore,omitempty"`
	Label   string              `json:"label,omitempty"`
	Bytes   int64               `json:"bytes"`
}

// checkBase refuses a publish over a version somebody published since its
// base (ART-7): stale_version, with the live version, who published it
// and when, and the paths changed since the base. The tool adds the first
// page of each changed text file where the turn could read it.
func checkBase(r pebble.Reader, art *artifact, base int) error {
	if base == art.Head {
		return nil
	}
	live, err := readVersion(r, art.ID, art.Head)
	if err != nil {
		return err
	}
	if live == nil {
		return fmt.Errorf("artifact %s has no row for its head version %d", art.ID, art.Head)
	}
	var changed []string
	if base < 1 || base > art.Head {
		for p := range live.Files {
			changed = append(changed, p)
		}
	} else {
		seen := map[string]bool{}
		for n := base + 1; n <= art.Head; n++ {
			v, err := readVersion(r, art.ID, n)
			if err != nil {
				return err
			}
			for _, p := range v.Changed {
				if !seen[p] {
					seen[p] = true
					changed = append(changed, p)
				}
			}
		}
	}
	sort.Strings(changed)
	return authority.Refuse(authority.StaleVersion, "%s is at version %d, published by @%s at %s, not %d; changed since: %s. Read it again with get_artifact and publish on what it holds now: no publish replaces a version it did not see.",
		art.ID, live.N, live.By.Seat, live.At.Format(time.RFC3339), base, orNone(changed)).
		WithData("version", live.N).WithData("published_by", live.By.Seat).WithData("published_at", live.At.Format(time.RFC3339)).
		WithData("changed", changed)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, ", ")
}

func (s *srv) publishArtifact(ctx context.Context, c authority.Caller, in publishIn) (artifactOut, error) {
	fresh := isFresh(c, in.OpID)
	call, err := s.w.Begin(c, "publish_artifact", &in, false)
	if err != nil {
		return artifactOut{}, err
	}
	var acc access
	wo, res, err := servers.Write[artifactResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		art, err := readArtifact(r, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if acc, err = s.decide(c, art, in.ID, authority.VerbPublish); err != nil {
			return servers.Intent{}, err
		}
		if err := trashed(art); err != nil {
			return servers.Intent{}, err
		}
		if err := checkText("label", in.Label, maxLabel, true); err != nil {
			return servers.Intent{}, err
		}
		if err := checkBase(r, art, in.BaseVersion); err != nil {
			return servers.Intent{}, err
		}
		q, err := quotaOf(r, c)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := checkPublish(q, art.ID, true, 0); err != nil {
			return servers.Intent{}, err
		}
		st := s.stager(ctx, call, fresh)
		pl, err := s.stagePublish(ctx, r, st, art, in)
		if err == nil {
			err = checkPublish(q, art.ID, true, pl.Bytes)
		}
		if err != nil {
			st.discard()
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindPublish, Payload: pl, What: fmt.Sprintf("the publish on version %d of %s", in.BaseVersion, art.ID)}, nil
	})
	if errors.Is(err, authority.ErrStaleVersion) {
		return artifactOut{}, s.staleDetails(ctx, c, acc, in.ID, authority.AsRefusal(err))
	}
	if err != nil {
		return artifactOut{}, err
	}
	out := artifactOut{WriteOut: wo, ID: in.ID, URL: s.url(in.ID)}
	if res != nil {
		out.Version, out.Changed = res.Version, res.Changed
		s.enter(ctx, c, in.ID, editing, focusVersion(res.Version))
	}
	return out, nil
}

// stagePublish turns a publish's arguments into its payload, with every
// new file's bytes already in the blob store, verified.
func (s *srv) stagePublish(ctx context.Context, r pebble.Reader, st *stager, art *artifact, in publishIn) (publishPayload, error) {
	pl := publishPayload{ID: art.ID, Base: in.BaseVersion, Label: in.Label}
	modes := 0
	for _, set := range []bool{len(in.Edits) > 0, in.Content != "" || len(in.Files) > 0, in.Source != nil, in.RestoreVersion != 0} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return pl, authority.Refuse(authority.Invalid, "A publish is one of: edits, content and files, source, or restore_version; this one names %d of them.", modes)
	}
	switch {
	case in.RestoreVersion != 0:
		v, err := readVersion(r, art.ID, in.RestoreVersion)
		if err != nil {
			return pl, err
		}
		if v == nil {
			return pl, authority.Refuse(authority.Invalid, "restore_version %d is no version of %s (it is at %d).", in.RestoreVersion, art.ID, art.Head).WithData("argument", "restore_version")
		}
		pl.Restore = v.N
	case in.Source != nil:
		files, err := st.fromSource(r, in.Source, art.Main)
		if err != nil {
			return pl, err
		}
		pl.Whole, pl.Files = true, map[string]*fileRef{}
		for p, f := range files {
			pl.Files[p] = &f
		}
	case len(in.Edits) > 0:
		base, err := readVersion(r, art.ID, art.Head)
		if err != nil {
			return pl, err
		}
		if pl.Files, err = s.applyEdits(ctx, st, art, base, in.Edits); err != nil {
			return pl, err
		}
	default:
		files, err := st.inlineFiles(art.Main, in.Content, in.Files, true)
		if err != nil {
			return pl, err
		}
		pl.Files = files
	}
	pl.Bytes = st.bytes
	return pl, nil
}

// applyEdits makes each exact replacement on the base version's text, in
// order, and stages each edited file once.
func (s *srv) applyEdits(ctx context.Context, st *stager, art *artifact, base *version, edits []editIn) (map[string]*fileRef, error) {
	texts := map[string]string{}
	var order []string
	for i, e := range edits {
		field := fmt.Sprintf("edits[%d]", i)
		p := art.Main
		if e.Path != "" {
			var err error
			if p, err = cleanPath(field+".path", e.Path); err != nil {
				return nil, err
			}
		}
		text, ok := texts[p]
		if !ok {
			f, found := base.Files[p]
			if !found {
				return nil, authority.Refuse(authority.Invalid, "%s names %s, which version %d does not hold.", field, p, base.N).WithData("argument", field)
			}
			data, err := s.readFile(ctx, f)
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(data) {
				return nil, authority.Refuse(authority.Invalid, "%s names %s, which is not text; replace it whole with files.", field, p).WithData("argument", field)
			}
			text = string(data)
			order = append(order, p)
		}
		old := servers.Unfence(e.OldStr)
		if old == "" {
			return nil, authority.Refuse(authority.Invalid, "%s.old_str is empty; name the exact text to replace.", field).WithData("argument", field)
		}
		switch n := strings.Count(text, old); n {
		case 1:
		case 0:
			return nil, authority.Refuse(authority.Invalid, "%s.old_str does not occur in %s as it is (after the edits before it); copy it exactly from get_artifact.", field, p).WithData("argument", field)
		default:
			return nil, authority.Refuse(authority.Invalid, "%s.old_str occurs %d times in %s; include enough around it to name one place.", field, n, p).WithData("argument", field)
		}
		texts[p] = strings.Replace(text, old, servers.Unfence(e.NewStr), 1)
	}
	out := map[string]*fileRef{}
	for _, p := range order {
		ref, err := st.inlineFile("edits", p, &fileIn{Content: texts[p], Type: base.Files[p].Type})
		if err != nil {
			return nil, err
		}
		out[p] = &ref
	}
	return out, nil
}

// staleDetails is a stale refusal with what the live version holds: the
// first page of each changed text file, fenced as its author's text, where
// this turn could read it; otherwise the numbers, the author and the
// paths alone, and live_files_withheld says so (ART-7).
func (s *srv) staleDetails(ctx context.Context, c authority.Caller, acc access, id string, stale *authority.Refusal) error {
	withheld := func(why string) error {
		r := stale.WithData("live_files_withheld", true)
		r.Sentence += " The live files are withheld: " + why
		return r
	}
	if !acc.ShowReads {
		return withheld("whom this turn acts for cannot read this artifact.")
	}
	var art *artifact
	var live *version
	err := s.w.View(func(r pebble.Reader) error {
		var err error
		if art, err = readArtifact(r, id); err != nil || art == nil {
			return err
		}
		live, err = readVersion(r, id, art.Head)
		return err
	})
	if err != nil || art == nil || live == nil {
		return stale
	}
	if read, err := s.decide(c, art, id, authority.VerbRead); err != nil {
		return withheld("this caller cannot read it.")
	} else if err := s.show(ctx, c, read, id, "publish_artifact", "the live files of a stale publish"); err != nil {
		return withheld("an administrator's read is recorded first, and the record could not be written.")
	}
	changed := strs(stale.Data["changed"])
	e := envelope()
	var files []map[string]any
	for _, p := range changed {
		f, ok := live.Files[p]
		if !ok {
			files = append(files, map[string]any{"path": p, "removed": true})
			continue
		}
		if len(files) == staleFilesShown || !isText(f) {
			files = append(files, map[string]any{"path": p, "size": f.Size, "type": f.Type})
			continue
		}
		data, err := s.readFile(ctx, f)
		if err != nil {
			return err
		}
		text, next := page(data, 0, stalePageBytes)
		entry := map[string]any{"path": p, "size": f.Size, "text": e.Fence(text, []servers.Author{live.By})}
		if next > 0 {
			entry["next_offset"] = next
		}
		files = append(files, entry)
	}
	return stale.WithData("live_files", files).WithData("provenance", e.Provenance())
}

func applyPublish(a *applier) (any, error) {
	var pl publishPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	art, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	if err := checkBase(a.R, art, pl.Base); err != nil {
		return nil, err
	}
	if err := a.countPublish(art.ID, true, pl.Bytes); err != nil {
		return nil, err
	}
	base, err := readVersion(a.R, art.ID, art.Head)
	if err != nil {
		return nil, err
	}
	next := base.clone()
	next.N, next.By, next.At, next.Label = art.Head+1, a.By, a.At(), pl.Label
	switch {
	case pl.Restore != 0:
		old, err := readVersion(a.R, art.ID, pl.Restore)
		if err != nil {
			return nil, err
		}
		if old == nil {
			return nil, authority.Refuse(authority.Invalid, "restore_version %d is no version of %s.", pl.Restore, art.ID)
		}
		next.Files, next.RestoredFrom = old.clone().Files, old.N
	case pl.Whole:
		next.Files = map[string]fileRef{}
		fallthrough
	default:
		for p, f := range pl.Files {
			if f == nil {
				delete(next.Files, p)
				continue
			}
			next.Files[p] = *f
			if err := a.hold(art.ID, f.Blob); err != nil {
				return nil, err
			}
		}
	}
	if len(next.Files) > maxFiles {
		return nil, authority.Refuse(authority.Invalid, "version %d would hold %d files; a version holds at most %d.", next.N, len(next.Files), maxFiles).WithData("limit", maxFiles)
	}
	next.Changed = diffPaths(base.Files, next.Files)
	if err := state.SetJSON(a.B, versionKey(art.ID, next.N), next); err != nil {
		return nil, err
	}
	art = art.clone()
	art.Head, art.UpdatedAt = next.N, a.At()
	if err := a.put(art); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("published version %d", next.N)
	if next.RestoredFrom != 0 {
		what += fmt.Sprintf(", restoring version %d", next.RestoredFrom)
	}
	if err := a.history(art.ID, what, next.N); err != nil {
		return nil, err
	}
	return artifactResult{ID: art.ID, Version: next.N, Changed: next.Changed}, nil
}

// diffPaths lists the paths added, changed or removed between two
// manifests.
func diffPaths(old, now map[string]fileRef) []string {
	var out []string
	for p, f := range now {
		if o, ok := old[p]; !ok || o.Digest != f.Digest || o.Type != f.Type {
			out = append(out, p)
		}
	}
	for p := range old {
		if _, ok := now[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// strs reads a list of strings from refusal data, as built here or as
// decoded from the op ledger.
func strs(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
