package tracker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// ---- search_work_items ----

// MaxQueryBytes bounds a search query: a query is stored nowhere, but past
// this it is a document, not a search, and it is refused rather than cut.
const MaxQueryBytes = 400

type searchIn struct {
	Query   string `json:"query" jsonschema:"what the item says, in words; at most 400 bytes"`
	Mode    string `json:"mode,omitempty" jsonschema:"hybrid (default), keyword or semantic"`
	Project string `json:"project,omitempty" jsonschema:"only this project's items"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many to answer, 1 to 50; default 10"`
}

type searchHit struct {
	summary
	Score float64 `json:"score"`
}

type searchOut struct {
	Mode     string      `json:"mode"`
	Degraded string      `json:"degraded,omitempty"`
	Items    []searchHit `json:"items"`
}

func (s *srv) searchWorkItems(_ context.Context, _ authority.Caller, in searchIn) (searchOut, error) {
	if len(in.Query) > MaxQueryBytes {
		return searchOut{}, authority.Refuse(authority.Invalid, "query is %d bytes; a search query is at most %d. Shorten it to the words the item would say.", len(in.Query), MaxQueryBytes)
	}
	if len(tokens(in.Query)) == 0 {
		return searchOut{}, authority.Refuse(authority.Invalid, "query has no words to search for.")
	}
	limit := in.Limit
	if limit == 0 {
		limit = 10
	}
	if limit < 1 || limit > 50 {
		return searchOut{}, authority.Refuse(authority.Invalid, "limit %d is outside 1 to 50.", in.Limit)
	}
	mode := in.Mode
	if mode == "" {
		mode = "hybrid"
	}
	out := searchOut{Items: []searchHit{}}
	switch mode {
	case "semantic":
		// No embedding provider serves the tracker: nothing can be ranked by
		// meaning, so nothing is run, and an empty answer must not read as
		// "no such item".
		out.Mode = "none"
		out.Degraded = "Semantic search is not available here (no embedding provider), so nothing was searched; this says nothing about whether such an item exists. Search again with mode keyword."
		return out, nil
	case "hybrid":
		out.Mode = "keyword"
		out.Degraded = "Hybrid search was asked for, but with no embedding provider only the keyword half runs: these are ranked by keyword alone."
	case "keyword":
		out.Mode = "keyword"
	default:
		return searchOut{}, authority.Refuse(authority.Invalid, "mode %q is not hybrid, keyword or semantic.", in.Mode)
	}
	err := s.view(func(r pebble.Reader) error {
		hits, err := rankKeyword(r, in.Query, strings.ToUpper(strings.TrimSpace(in.Project)))
		if err != nil {
			return err
		}
		for _, h := range hits {
			if len(out.Items) == limit {
				break
			}
			var sm summary
			found, err := getJSON(r, kSummary+h.Key, &sm)
			if err != nil {
				return err
			}
			if found {
				out.Items = append(out.Items, searchHit{summary: sm, Score: float64(int(h.Score*1000)) / 1000})
			}
		}
		return nil
	})
	return out, err
}

// ---- merge_work_item ----

type mergeIn struct {
	Key  string `json:"key" jsonschema:"the duplicate, which is closed as cancelled"`
	Into string `json:"into" jsonschema:"the item that survives"`
	OpID string `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type mergeOut struct {
	writeOut
	Survivor   string   `json:"survivor,omitempty"`
	Version    int      `json:"version,omitempty"`
	Reparented []string `json:"reparented,omitempty"`
}

func (s *srv) mergeWorkItem(ctx context.Context, c authority.Caller, in mergeIn) (mergeOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "merge_work_item", in, given, false)
	if err != nil {
		return mergeOut{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		pl := mergePayload{common: oc.common}
		err = s.view(func(r pebble.Reader) error {
			dup, err := readItem(r, in.Key)
			if err != nil {
				return err
			}
			if dup == nil {
				return authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
			}
			surv, err := readItem(r, in.Into)
			if err != nil {
				return err
			}
			if surv == nil {
				return authority.Refuse(authority.Invalid, "into names %s, which is no work item.", in.Into)
			}
			if surv.Key == dup.Key {
				return authority.Refuse(authority.Invalid, "into names %s itself; an item cannot be merged into itself.", surv.Key)
			}
			pl.Key, pl.Into = dup.Key, surv.Key
			return nil
		})
		if err != nil {
			return mergeOut{}, err
		}
		a, err = s.write(ctx, oc, kindMerge, pl)
	}
	if errors.Is(err, errUnknown) {
		return mergeOut{}, s.unknownRefusal(oc, "the merge of "+strings.ToUpper(in.Key), "")
	}
	if err != nil {
		return mergeOut{}, err
	}
	out := mergeOut{writeOut: oc.out(a)}
	if a.Outcome == state.Applied {
		var res itemResult
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return mergeOut{}, err
		}
		out.Survivor, out.Version, out.Reparented = res.Key, res.Version, res.Reparented
	}
	return out, nil
}

// ---- move_work_item ----

type moveIn struct {
	Key     string `json:"key" jsonschema:"a top-level item; its subtasks move with it"`
	Project string `json:"project" jsonschema:"the project to move it to"`
	OpID    string `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type moveOut struct {
	writeOut
	Key     string            `json:"key,omitempty"`
	Version int               `json:"version,omitempty"`
	Rekeyed map[string]string `json:"rekeyed,omitempty"`
}

func (s *srv) moveWorkItem(ctx context.Context, c authority.Caller, in moveIn) (moveOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "move_work_item", in, given, false)
	if err != nil {
		return moveOut{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		pl := movePayload{common: oc.common}
		err = s.view(func(r pebble.Reader) error {
			it, err := readItem(r, in.Key)
			if err != nil {
				return err
			}
			if it == nil {
				return authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
			}
			from, _, err := s.resolveProject(r, c, it.Project)
			if err != nil {
				return err
			}
			// Moving work out of a project re-routes it, which is the
			// project lead's call.
			if !s.mayLead(c, from) {
				return authority.Refuse(authority.Forbidden, "Moving %s out of %s is %s's lead's decision (%s); ask them.", it.Key, from.Key, from.Key, orNone(s.lead(from)))
			}
			if strings.TrimSpace(in.Project) == "" {
				return authority.Refuse(authority.Invalid, "project is empty; name the project to move it to.")
			}
			to, _, err := s.resolveProject(r, c, in.Project)
			if err != nil {
				return err
			}
			if it.Parent != "" {
				return authority.Refuse(authority.Invalid, "key: %s is a subtask of %s; move %s and its subtasks go with it.", it.Key, it.Parent, it.Parent)
			}
			if to.Key == it.Project {
				return authority.Refuse(authority.Invalid, "project: %s is already in %s.", it.Key, to.Key)
			}
			pl.Key, pl.To = it.Key, to
			return nil
		})
		if err != nil {
			return moveOut{}, err
		}
		a, err = s.write(ctx, oc, kindMove, pl)
	}
	if errors.Is(err, errUnknown) {
		return moveOut{}, s.unknownRefusal(oc, "the move of "+strings.ToUpper(in.Key), "")
	}
	if err != nil {
		return moveOut{}, err
	}
	out := moveOut{writeOut: oc.out(a)}
	if a.Outcome == state.Applied {
		var res itemResult
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return moveOut{}, err
		}
		out.Key, out.Version, out.Rekeyed = res.Key, res.Version, res.Rekeyed
	}
	return out, nil
}

// ---- project files ----

// MaxFileBytes bounds one file written inline in a call; past it the write is
// refused, never cut.
const MaxFileBytes = 1 << 20

// filePageBytes is one page of a file read.
const filePageBytes = 64 << 10

func cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	c := path.Clean("/" + p)[1:]
	if p == "" || c == "" || c != strings.TrimPrefix(p, "/") || strings.ContainsAny(c, "\x00\\") || len(c) > 512 {
		return "", authority.Refuse(authority.Invalid, "path %q is not a file path: use slash-separated names like specs/api.md, with no .. and at most 512 bytes.", p)
	}
	return c, nil
}

type listFilesIn struct {
	Project string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
	After   string `json:"after,omitempty" jsonschema:"next_after from the previous page"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many files, 1 to 200; default 100"`
}

type fileInfo struct {
	Path    string   `json:"path"`
	Type    string   `json:"type"`
	Size    int      `json:"size"`
	Version int      `json:"version"`
	Writers []string `json:"writers"`
	Updated string   `json:"updated_at"`
}

type listFilesOut struct {
	Project   string     `json:"project"`
	Files     []fileInfo `json:"files"`
	NextAfter string     `json:"next_after,omitempty"`
}

func (s *srv) listProjectFiles(_ context.Context, c authority.Caller, in listFilesIn) (listFilesOut, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > 200 {
		return listFilesOut{}, authority.Refuse(authority.Invalid, "limit %d is outside 1 to 200.", in.Limit)
	}
	out := listFilesOut{Files: []fileInfo{}}
	err := s.view(func(r pebble.Reader) error {
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return err
		}
		out.Project = d.Key
		prefix := kFile + d.Key + "/"
		lower := []byte(prefix)
		if in.After != "" {
			lower = append([]byte(prefix+in.After), 0)
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte(kFile + d.Key + "0")})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			var f file
			if err := json.Unmarshal(it.Value(), &f); err != nil {
				return err
			}
			if len(out.Files) == limit {
				out.NextAfter = out.Files[len(out.Files)-1].Path
				break
			}
			out.Files = append(out.Files, fileInfo{Path: f.Path, Type: f.Type, Size: len(f.Content), Version: f.Version, Writers: seats(f.Writers), Updated: f.Updated.Format("2006-01-02T15:04:05Z07:00")})
		}
		return nil
	})
	return out, err
}

func seats(ws []writer) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Seat)
	}
	return out
}

type readFileIn struct {
	Project string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
	Path    string `json:"path" jsonschema:"the file's path"`
	Offset  int    `json:"offset,omitempty" jsonschema:"byte offset to read from; next_offset of the previous page"`
	Base64  bool   `json:"base64,omitempty" jsonschema:"answer the bytes as base64 instead of text"`
}

type readFileOut struct {
	Provenance *provenance `json:"provenance,omitempty"`
	Path       string      `json:"path"`
	Type       string      `json:"type"`
	Size       int         `json:"size"`
	Version    int         `json:"version"`
	Offset     int         `json:"offset"`
	Text       string      `json:"text,omitempty"`
	Base64     string      `json:"base64,omitempty"`
	NextOffset int         `json:"next_offset,omitempty"`
	Note       string      `json:"note,omitempty"`
}

func (s *srv) readProjectFile(_ context.Context, c authority.Caller, in readFileIn) (readFileOut, error) {
	p, err := cleanPath(in.Path)
	if err != nil {
		return readFileOut{}, err
	}
	var out readFileOut
	err = s.view(func(r pebble.Reader) error {
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return err
		}
		var f file
		found, err := getJSON(r, kFile+d.Key+"/"+p, &f)
		if err != nil {
			return err
		}
		if !found {
			return authority.Refuse(authority.NotFound, "Project %s has no file at %s.", d.Key, p)
		}
		if in.Offset < 0 || in.Offset > len(f.Content) {
			return authority.Refuse(authority.Invalid, "offset %d is outside the file's %d bytes.", in.Offset, len(f.Content))
		}
		out = readFileOut{Path: f.Path, Type: f.Type, Size: len(f.Content), Version: f.Version, Offset: in.Offset}
		end := min(len(f.Content), in.Offset+filePageBytes)
		if in.Base64 {
			out.Base64 = base64.StdEncoding.EncodeToString(f.Content[in.Offset:end])
		} else {
			if !utf8.Valid(f.Content) {
				return authority.Refuse(authority.Invalid, "base64: %s holds bytes that are not text; read it with base64: true.", p)
			}
			// A page ends on a whole character, never inside one.
			for end < len(f.Content) && !utf8.RuneStart(f.Content[end]) {
				end--
			}
			var e envelope
			out.Text = e.fence(string(f.Content[in.Offset:end]), f.Writers)
			pv := e.provenance()
			out.Provenance = &pv
		}
		if end < len(f.Content) {
			out.NextOffset = end
			out.Note = "This is one page of the file; read on from next_offset."
		}
		return nil
	})
	return out, err
}

type writeFileIn struct {
	Project   string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
	Path      string `json:"path" jsonschema:"where the file goes, e.g. specs/api.md"`
	Content   string `json:"content,omitempty" jsonschema:"the whole text of the file"`
	Base64    string `json:"base64,omitempty" jsonschema:"the whole file as base64, instead of content"`
	Type      string `json:"type,omitempty" jsonschema:"media type; default text/markdown for text, application/octet-stream for base64"`
	IfVersion int    `json:"if_version,omitempty" jsonschema:"the version you read; refused if the file changed since"`
	OpID      string `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type writeFileOut struct {
	writeOut
	Path    string `json:"path,omitempty"`
	Version int    `json:"version,omitempty"`
	Size    int    `json:"size,omitempty"`
}

func (s *srv) writeProjectFile(ctx context.Context, c authority.Caller, in writeFileIn) (writeFileOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "write_project_file", in, given, false)
	if err != nil {
		return writeFileOut{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		p, perr := cleanPath(in.Path)
		if perr != nil {
			return writeFileOut{}, perr
		}
		content := []byte(unfence(in.Content))
		typ := in.Type
		if in.Base64 != "" {
			if in.Content != "" {
				return writeFileOut{}, authority.Refuse(authority.Invalid, "content and base64 are both set; send the file one way.")
			}
			if content, err = base64.StdEncoding.DecodeString(in.Base64); err != nil {
				return writeFileOut{}, authority.Refuse(authority.Invalid, "base64 is not valid base64: %v.", err)
			}
			if typ == "" {
				typ = "application/octet-stream"
			}
		}
		if typ == "" {
			typ = "text/markdown"
		}
		if len(content) > MaxFileBytes {
			return writeFileOut{}, authority.Refuse(authority.Invalid, "content is %d bytes; a file written in one call is at most %d.", len(content), MaxFileBytes)
		}
		pl := fileWritePayload{common: oc.common, Path: p, Type: typ, Content: content, IfVersion: in.IfVersion}
		var same *file
		err = s.view(func(r pebble.Reader) error {
			d, _, err := s.resolveProject(r, c, in.Project)
			if err != nil {
				return err
			}
			pl.Project = d
			var f file
			found, err := getJSON(r, kFile+d.Key+"/"+p, &f)
			if err != nil {
				return err
			}
			if in.IfVersion != 0 && (!found || f.Version != in.IfVersion) {
				return authority.Refuse(authority.StaleVersion, "%s in %s is at version %d, not %d; read it again and decide from what it holds now.", p, d.Key, f.Version, in.IfVersion).WithData("version", f.Version)
			}
			if found && f.Type == typ && slices.Equal(f.Content, content) {
				same = &f
			}
			return nil
		})
		if err != nil {
			return writeFileOut{}, err
		}
		if same != nil {
			// Nothing would change, so nothing is written.
			return writeFileOut{writeOut: writeOut{Outcome: "unchanged", Position: s.d.Node.Position()}, Path: same.Path, Version: same.Version, Size: len(same.Content)}, nil
		}
		a, err = s.write(ctx, oc, kindFileWrite, pl)
	}
	if errors.Is(err, errUnknown) {
		return writeFileOut{}, s.unknownRefusal(oc, "the file write", "")
	}
	if err != nil {
		return writeFileOut{}, err
	}
	out := writeFileOut{writeOut: oc.out(a)}
	if a.Outcome == state.Applied {
		var res fileResult
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return writeFileOut{}, err
		}
		out.Path, out.Version, out.Size = res.Path, res.Version, res.Size
	}
	return out, nil
}

type removeFileIn struct {
	Project string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
	Path    string `json:"path" jsonschema:"the file's path"`
	OpID    string `json:"op_id,omitempty" jsonschema:"operator surface only: the op_id an earlier answer gave, sent with the same arguments to finish that call"`
}

type removeFileOut struct {
	writeOut
	Path    string `json:"path,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

func (s *srv) removeProjectFile(ctx context.Context, c authority.Caller, in removeFileIn) (removeFileOut, error) {
	given := in.OpID
	in.OpID = ""
	oc, err := s.begin(c, "remove_project_file", in, given, false)
	if err != nil {
		return removeFileOut{}, err
	}
	a, ok, err := s.recorded(oc)
	if !ok && err == nil {
		p, perr := cleanPath(in.Path)
		if perr != nil {
			return removeFileOut{}, perr
		}
		pl := fileRemovePayload{common: oc.common, Path: p}
		err = s.view(func(r pebble.Reader) error {
			d, _, err := s.resolveProject(r, c, in.Project)
			if err != nil {
				return err
			}
			if !s.mayLead(c, d) {
				return authority.Refuse(authority.Forbidden, "Removing a file from %s is its lead's (%s); ask them.", d.Key, orNone(s.lead(d)))
			}
			ok, err := exists(r, kFile+d.Key+"/"+p)
			if err != nil {
				return err
			}
			if !ok {
				return authority.Refuse(authority.NotFound, "Project %s has no file at %s.", d.Key, p)
			}
			pl.Project = d.Key
			return nil
		})
		if err != nil {
			return removeFileOut{}, err
		}
		a, err = s.write(ctx, oc, kindFileRm, pl)
	}
	if errors.Is(err, errUnknown) {
		return removeFileOut{}, s.unknownRefusal(oc, "the file removal", "")
	}
	if err != nil {
		return removeFileOut{}, err
	}
	out := removeFileOut{writeOut: oc.out(a)}
	if a.Outcome == state.Applied {
		var res fileResult
		if err := json.Unmarshal(a.Result, &res); err != nil {
			return removeFileOut{}, err
		}
		out.Path, out.Removed = res.Path, res.Removed
	}
	return out, nil
}
