package tracker

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// file is one project file. Its bytes are not in the projection or the
// log but in the node's blob store (TRK-2: a removed file's content must
// really be deleted, and the log keeps everything it is given); the row
// names the blob and the digest it is checked against.
type file struct {
	Project string           `json:"project"`
	Path    string           `json:"path"`
	Type    string           `json:"type"`
	Blob    string           `json:"blob"`
	Digest  string           `json:"digest"`
	Size    int              `json:"size"`
	Version int              `json:"version"`
	Writers []servers.Author `json:"writers"`
	Updated time.Time        `json:"updated_at"`
}

func fileKey(project, path string) string { return kFile + project + "/" + path }

// ---- project files ----

// MaxFileBytes bounds one file written inline in a call; past it the write is
// refused, never cut.
const MaxFileBytes = 1 << 20

// filePageBytes is one page of a file read.
const filePageBytes = 64 << 10

func cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	c := path.Clean("/" + p)[1:]
	if p == "" || c == "" || c != strings.TrimPrefix(p, "/") || strings.ContainsAny(c, "\x00\\\t\r\n") || len(c) > 512 {
		return "", authority.Refuse(authority.Invalid, "path %q is not a file path: use slash-separated names like specs/api.md, on one line, with no .. and at most 512 bytes.", p)
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
	limit, err := servers.PageLimit(in.Limit, 100, 200)
	if err != nil {
		return listFilesOut{}, err
	}
	out := listFilesOut{Files: []fileInfo{}}
	err = s.w.View(func(r pebble.Reader) error {
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
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: state.Upper(prefix)})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			var f file
			if err := state.DecodeJSON(it.Key(), it.Value(), &f); err != nil {
				return err
			}
			if len(out.Files) == limit {
				out.NextAfter = out.Files[len(out.Files)-1].Path
				break
			}
			out.Files = append(out.Files, fileInfo{Path: f.Path, Type: f.Type, Size: f.Size, Version: f.Version, Writers: seats(f.Writers), Updated: f.Updated.Format("2006-01-02T15:04:05Z07:00")})
		}
		return nil
	})
	return out, err
}

func seats(ws []servers.Author) []string {
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
	Provenance *servers.Provenance `json:"provenance,omitempty"`
	Path       string              `json:"path"`
	Type       string              `json:"type"`
	Size       int                 `json:"size"`
	Version    int                 `json:"version"`
	Offset     int                 `json:"offset"`
	Text       string              `json:"text,omitempty"`
	Base64     string              `json:"base64,omitempty"`
	NextOffset int                 `json:"next_offset,omitempty"`
	Note       string              `json:"note,omitempty"`
}

func (s *srv) readProjectFile(ctx context.Context, c authority.Caller, in readFileIn) (readFileOut, error) {
	p, err := cleanPath(in.Path)
	if err != nil {
		return readFileOut{}, err
	}
	var f file
	err = s.w.View(func(r pebble.Reader) error {
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return err
		}
		found, err := state.GetJSON(r, fileKey(d.Key, p), &f)
		if err != nil {
			return err
		}
		if !found {
			return authority.Refuse(authority.NotFound, "Project %s has no file at %s.", d.Key, p)
		}
		return nil
	})
	if err != nil {
		return readFileOut{}, err
	}
	if in.Offset < 0 || in.Offset > f.Size {
		return readFileOut{}, authority.Refuse(authority.Invalid, "offset %d is outside the file's %d bytes.", in.Offset, f.Size)
	}
	content, err := s.w.Node().Blob(ctx, f.Blob, f.Digest)
	if err != nil {
		return readFileOut{}, err
	}
	if !in.Base64 && in.Offset < len(content) && !utf8.RuneStart(content[in.Offset]) {
		// A page read as text starts on a whole character; next_offset
		// always does.
		start := in.Offset
		for start > 0 && !utf8.RuneStart(content[start]) {
			start--
		}
		return readFileOut{}, authority.Refuse(authority.Invalid, "offset %d falls inside a character; read from %d (next_offset always lands on a whole character).", in.Offset, start).
			WithData("offset", start)
	}
	out := readFileOut{Path: f.Path, Type: f.Type, Size: f.Size, Version: f.Version, Offset: in.Offset}
	end := min(len(content), in.Offset+filePageBytes)
	if in.Base64 {
		out.Base64 = base64.StdEncoding.EncodeToString(content[in.Offset:end])
	} else {
		if !utf8.Valid(content) {
			return readFileOut{}, authority.Refuse(authority.Invalid, "base64: %s holds bytes that are not text; read it with base64: true.", p)
		}
		// A page ends on a whole character, never inside one.
		for end < len(content) && !utf8.RuneStart(content[end]) {
			end--
		}
		e := envelope()
		out.Text = e.Fence(string(content[in.Offset:end]), f.Writers)
		pv := e.Provenance()
		out.Provenance = &pv
	}
	if end < len(content) {
		out.NextOffset = end
		out.Note = "This is one page of the file; read on from next_offset."
	}
	return out, nil
}

type writeFileIn struct {
	Project   string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
	Path      string `json:"path" jsonschema:"where the file goes, e.g. specs/api.md"`
	Content   string `json:"content,omitempty" jsonschema:"the whole text of the file"`
	Base64    string `json:"base64,omitempty" jsonschema:"the whole file as base64, instead of content"`
	Type      string `json:"type,omitempty" jsonschema:"media type; default text/markdown for text, application/octet-stream for base64"`
	IfVersion int    `json:"if_version,omitempty" jsonschema:"the version you read; refused if the file changed since"`
	servers.OpIDArg
}

type writeFileOut struct {
	servers.WriteOut
	Path    string `json:"path,omitempty"`
	Version int    `json:"version,omitempty"`
	Size    int    `json:"size,omitempty"`
}

type fileWritePayload struct {
	Project   projectDecl `json:"project"`
	Path      string      `json:"path"`
	Type      string      `json:"type"`
	Blob      string      `json:"blob"`
	Digest    string      `json:"digest"`
	Size      int         `json:"size"`
	IfVersion int         `json:"if_version,omitempty"`
}

type fileRemovePayload struct {
	Project string `json:"project"`
	Path    string `json:"path"`
}

type fileResult struct {
	Project string `json:"project"`
	Path    string `json:"path"`
	Version int    `json:"version"`
	Size    int    `json:"size"`
	Removed bool   `json:"removed,omitempty"`
}

// checkFileVersion refuses a write stated against a version the file has
// moved past (if_version).
func checkFileVersion(f file, found bool, project, p string, ifVersion int) error {
	if ifVersion != 0 && (!found || f.Version != ifVersion) {
		return authority.Refuse(authority.StaleVersion, "%s in %s is at version %d, not %d; read it again and decide from what it holds now.", p, project, f.Version, ifVersion).WithData("version", f.Version)
	}
	return nil
}

// fileContent decodes what a write sends: text, or base64 bytes.
func fileContent(in writeFileIn) (content []byte, typ string, err error) {
	content, typ = []byte(servers.Unfence(in.Content)), in.Type
	if in.Base64 != "" {
		if in.Content != "" {
			return nil, "", authority.Refuse(authority.Invalid, "content and base64 are both set; send the file one way.")
		}
		if content, err = base64.StdEncoding.DecodeString(in.Base64); err != nil {
			return nil, "", authority.Refuse(authority.Invalid, "base64 is not valid base64: %v.", err)
		}
		if typ == "" {
			typ = "application/octet-stream"
		}
	}
	if typ == "" {
		typ = "text/markdown"
	}
	if err := checkSize("type", typ, maxFileType); err != nil {
		return nil, "", err
	}
	if len(content) > MaxFileBytes {
		return nil, "", authority.Refuse(authority.Invalid, "content is %d bytes; a file written in one call is at most %d.", len(content), MaxFileBytes)
	}
	return content, typ, nil
}

func (s *srv) writeProjectFile(ctx context.Context, c authority.Caller, in writeFileIn) (writeFileOut, error) {
	call, err := s.w.Begin(c, "write_project_file", &in, false)
	if err != nil {
		return writeFileOut{}, err
	}
	var same *file
	wo, res, err := servers.Write[fileResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		p, err := cleanPath(in.Path)
		if err != nil {
			return servers.Intent{}, err
		}
		content, typ, err := fileContent(in)
		if err != nil {
			return servers.Intent{}, err
		}
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return servers.Intent{}, err
		}
		var f file
		found, err := state.GetJSON(r, fileKey(d.Key, p), &f)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := checkFileVersion(f, found, d.Key, p, in.IfVersion); err != nil {
			return servers.Intent{}, err
		}
		if found && f.Type == typ && f.Digest == state.Digest(content) {
			// Nothing would change, so nothing is written.
			same = &f
			return servers.Intent{}, nil
		}
		// The bytes go to the blob store before the operation that refers
		// to them is written; the operation's id names them, so a repeat
		// puts the same blob.
		digest, err := s.w.Node().PutBlob(ctx, string(call.ID), content)
		if err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindFileWrite, What: "the file write",
			Payload: fileWritePayload{Project: d, Path: p, Type: typ, Blob: string(call.ID), Digest: digest, Size: len(content), IfVersion: in.IfVersion}}, nil
	})
	if err != nil {
		return writeFileOut{}, err
	}
	out := writeFileOut{WriteOut: wo}
	switch {
	case same != nil:
		out.Path, out.Version, out.Size = same.Path, same.Version, same.Size
	case res != nil:
		out.Path, out.Version, out.Size = res.Path, res.Version, res.Size
		// An overwritten version's bytes go now, not at the next sweep.
		s.eraseFreed(ctx)
	}
	return out, nil
}

func applyFileWrite(a *applier) (any, error) {
	var pl fileWritePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	p, err := a.ensureProject(pl.Project)
	if err != nil {
		return nil, err
	}
	var f file
	found, err := state.GetJSON(a.R, fileKey(p.Key, pl.Path), &f)
	if err != nil {
		return nil, err
	}
	if err := checkFileVersion(f, found, p.Key, pl.Path, pl.IfVersion); err != nil {
		return nil, err
	}
	if found {
		// The version it replaces keeps no bytes anywhere.
		if err := state.FreeBlob(a.B, f.Blob); err != nil {
			return nil, err
		}
	}
	if err := state.HoldBlob(a.B, pl.Blob); err != nil {
		return nil, err
	}
	f.Project, f.Path, f.Type, f.Blob, f.Digest, f.Size = p.Key, pl.Path, pl.Type, pl.Blob, pl.Digest, pl.Size
	f.Version++
	f.Updated = a.At()
	if !slices.Contains(f.Writers, a.By) {
		f.Writers = append(f.Writers, a.By)
	}
	if err := state.SetJSON(a.B, fileKey(p.Key, pl.Path), f); err != nil {
		return nil, err
	}
	if err := a.activity("file_written", p.Key, "", fmt.Sprintf("wrote %s (%d bytes)", pl.Path, pl.Size), nil); err != nil {
		return nil, err
	}
	return fileResult{Project: p.Key, Path: pl.Path, Version: f.Version, Size: f.Size}, nil
}

type removeFileIn struct {
	Project string `json:"project,omitempty" jsonschema:"project key; defaults to your own unit's project"`
	Path    string `json:"path" jsonschema:"the file's path"`
	servers.OpIDArg
}

type removeFileOut struct {
	servers.WriteOut
	Path    string `json:"path,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

func (s *srv) removeProjectFile(ctx context.Context, c authority.Caller, in removeFileIn) (removeFileOut, error) {
	call, err := s.w.Begin(c, "remove_project_file", &in, false)
	if err != nil {
		return removeFileOut{}, err
	}
	wo, res, err := servers.Write[fileResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		p, err := cleanPath(in.Path)
		if err != nil {
			return servers.Intent{}, err
		}
		d, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return servers.Intent{}, err
		}
		if !s.mayLead(c, d) {
			return servers.Intent{}, authority.Refuse(authority.Forbidden, "Removing a file from %s is its lead's (%s); ask them.", d.Key, orNone(s.lead(d)))
		}
		if err := checkFileExists(r, d.Key, p); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindFileRm, What: "the file removal", Payload: fileRemovePayload{Project: d.Key, Path: p}}, nil
	})
	if err != nil {
		return removeFileOut{}, err
	}
	out := removeFileOut{WriteOut: wo}
	if res != nil {
		out.Path, out.Removed = res.Path, res.Removed
		s.eraseFreed(ctx)
	}
	return out, nil
}

// eraseFreed erases the bytes of the versions a write just freed, so they
// are gone when the write answers. A failure is the node's to retry: its
// blob keeper erases what is left on its next pass, and the write itself
// stands.
func (s *srv) eraseFreed(ctx context.Context) {
	if err := s.w.Node().EraseFreed(ctx); err != nil {
		s.d.Logger.Error("tracker: erasing freed file bytes", "err", err)
	}
}

// checkFileExists refuses naming a file the project does not have.
func checkFileExists(r pebble.Reader, project, p string) error {
	ok, err := state.Exists(r, fileKey(project, p))
	if err != nil {
		return err
	}
	if !ok {
		return authority.Refuse(authority.NotFound, "Project %s has no file at %s.", project, p)
	}
	return nil
}

func applyFileRemove(a *applier) (any, error) {
	var pl fileRemovePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	var f file
	found, err := state.GetJSON(a.R, fileKey(pl.Project, pl.Path), &f)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, authority.Refuse(authority.NotFound, "Project %s has no file at %s.", pl.Project, pl.Path)
	}
	// The content goes with the row: its blob is freed, and erased.
	if err := state.FreeBlob(a.B, f.Blob); err != nil {
		return nil, err
	}
	if err := a.B.Delete([]byte(fileKey(pl.Project, pl.Path)), nil); err != nil {
		return nil, err
	}
	if err := a.activity("file_removed", pl.Project, "", "removed "+pl.Path, nil); err != nil {
		return nil, err
	}
	return fileResult{Project: pl.Project, Path: pl.Path, Removed: true}, nil
}

// ProjectFile is a project file as another first-party server on the node
// reads it (the artifact store publishes a project's file or a directory
// of them): where its bytes are in the node's blob store and the digest
// they are checked against, never the bytes themselves.
type ProjectFile struct {
	Path    string
	Type    string
	Blob    string
	Digest  string
	Size    int
	Writers []servers.Author
}

// ProjectFiles reads project's file at p or, when p ends in "/", every
// file under that directory, in path order; none is found as an empty
// list. The tracker owns its layout, so nobody else reads its rows
// directly.
func ProjectFiles(r pebble.Reader, project, p string) ([]ProjectFile, error) {
	project = strings.ToUpper(strings.TrimSpace(project))
	dirOnly := strings.HasSuffix(p, "/")
	clean, err := cleanPath(strings.TrimSuffix(p, "/"))
	if err != nil && p != "/" {
		return nil, err
	}
	var out []ProjectFile
	conv := func(f file) ProjectFile {
		return ProjectFile{Path: f.Path, Type: f.Type, Blob: f.Blob, Digest: f.Digest, Size: f.Size, Writers: slices.Clone(f.Writers)}
	}
	if !dirOnly {
		var f file
		found, err := state.GetJSON(r, fileKey(project, clean), &f)
		if err != nil || !found {
			return nil, err
		}
		return []ProjectFile{conv(f)}, nil
	}
	prefix := kFile + project + "/"
	if p != "/" {
		prefix += clean + "/"
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: state.Upper(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		var f file
		if err := state.DecodeJSON(it.Key(), it.Value(), &f); err != nil {
			return nil, err
		}
		out = append(out, conv(f))
	}
	return out, nil
}
