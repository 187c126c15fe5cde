package artifacts

import (
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/tracker-mcp"
)

// Where a version's bytes come from (ART-8): inline in the call (at most
// 1 MiB decoded in all), or streamed from a project's files or the build
// of the turn's coding run (builds.go). Every file
// goes into the node's blob store under a name of the operation's own, and
// is read back and checked against its digest before the version is
// decided: a version never points at bytes that are not there whole.

// Bounds (OUT-2): past one, a call is refused naming the field and the
// limit, never cut.
const (
	maxInline       = 1 << 20   // decoded bytes inline in one call
	maxFiles        = 1000      // files in one version
	maxPath         = 512       // bytes of a file's path
	maxVersionBytes = 512 << 20 // bytes of one version's files together
	maxTitle        = 200
	maxDescription  = 4 << 10
	maxIcon         = 64
	maxLabel        = 200
	maxType         = 255
	pageBytes       = 64 << 10 // one page of a file's text
	stalePageBytes  = 16 << 10 // the first page of a changed file in a stale refusal
	staleFilesShown = 20
)

// assetDir is where an artifact's assets are served from beside its
// version's files; no version file may sit under it.
const assetDir = "assets/"

// fileIn is one file sent inline.
type fileIn struct {
	Content string `json:"content,omitempty" jsonschema:"the file's whole text"`
	Base64  string `json:"base64,omitempty" jsonschema:"the file's bytes as base64, instead of content"`
	Type    string `json:"type,omitempty" jsonschema:"media type; by default from the path's extension"`
}

// sourceIn names bytes that are streamed rather than sent.
type sourceIn struct {
	Project string `json:"project,omitempty" jsonschema:"a project key: the files come from this project's files"`
	Path    string `json:"path,omitempty" jsonschema:"a project file, or a directory of project files ending in /, whose files become the version's files at their paths under it"`
	Sandbox string `json:"sandbox,omitempty" jsonschema:"a directory of the turn's coding run whose build becomes the version"`
}

func tooBig(field string, size, limit int) error {
	return authority.Refuse(authority.Invalid, "%s is %d bytes; it may be at most %d.", field, size, limit).
		WithData("argument", field).WithData("limit", limit)
}

func checkText(field, s string, limit int, oneLine bool) error {
	if len(s) > limit {
		return tooBig(field, len(s), limit)
	}
	if oneLine && strings.ContainsAny(s, "\r\n") {
		return authority.Refuse(authority.Invalid, "%s holds a line break; it is one line.", field).WithData("argument", field)
	}
	return nil
}

// cleanPath checks a file's path inside a version.
func cleanPath(field, p string) (string, error) {
	p = strings.TrimSpace(p)
	c := path.Clean("/" + p)[1:]
	if p == "" || c == "" || c != strings.TrimPrefix(p, "/") || strings.ContainsAny(c, "\x00\\\t\r\n?#") || len(c) > maxPath {
		return "", authority.Refuse(authority.Invalid, "%s %q is not a file path: use slash-separated names like css/site.css, on one line, with no .., ? or # and at most %d bytes.", field, p, maxPath).
			WithData("argument", field)
	}
	if strings.HasPrefix(c+"/", assetDir) {
		return "", authority.Refuse(authority.Invalid, "%s %q is under %s, where an artifact's assets are served; upload it with upload_artifact_asset, or choose another path.", field, p, assetDir).
			WithData("argument", field)
	}
	return c, nil
}

// typeOf is a file's media type: the one given, or the path's extension's,
// or plain text for text and octet-stream for anything else.
func typeOf(p string, data []byte, given string) (string, error) {
	if given != "" {
		return given, checkText("type", given, maxType, true)
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t, nil
	}
	if utf8.Valid(data) {
		return "text/plain; charset=utf-8", nil
	}
	return "application/octet-stream", nil
}

// isText reports whether a file is text a reader is answered as text.
func isText(f fileRef) bool {
	t := strings.ToLower(f.Type)
	return strings.HasPrefix(t, "text/") || strings.Contains(t, "json") || strings.Contains(t, "javascript") ||
		strings.Contains(t, "xml") || strings.Contains(t, "svg") || strings.Contains(t, "markdown") || strings.Contains(t, "csv")
}

// decode is an inline file's bytes.
func decode(field string, f *fileIn) ([]byte, error) {
	if f.Base64 != "" {
		if f.Content != "" {
			return nil, authority.Refuse(authority.Invalid, "%s has both content and base64; send the file one way.", field).WithData("argument", field)
		}
		b, err := base64.StdEncoding.DecodeString(f.Base64)
		if err != nil {
			return nil, authority.Refuse(authority.Invalid, "%s.base64 is not valid base64: %v.", field, err).WithData("argument", field)
		}
		return b, nil
	}
	return []byte(servers.Unfence(f.Content)), nil
}

// stager puts one call's files into the blob store, each under a name of
// the call's operation, in a fixed order: the same call repeated puts the
// same blobs again, which the store keeps as they are.
type stager struct {
	s      *srv
	ctx    context.Context
	op     string
	caller authority.Caller
	by     servers.Author
	n      int
	inline int
	bytes  int64
	// fresh: the operation was minted for this very call, so if the call
	// is refused before it is written nothing can refer to what it put.
	fresh bool
	put_  []string
}

// stager starts staging a call's files. fresh says the call's operation
// was minted by this call (a person's call without an op_id): a seat's
// retried operation, or an op_id sent back, may already be in the log
// with these very blobs.
func (s *srv) stager(ctx context.Context, call *servers.Call, fresh bool) *stager {
	return &stager{s: s, ctx: ctx, op: string(call.ID), caller: call.Caller, by: servers.AuthorOf(call.Caller), fresh: fresh}
}

// discard erases what a refused fresh call put, so a refusal leaves no
// bytes behind; otherwise the node's orphan sweep does, after its grace.
func (st *stager) discard() {
	if !st.fresh {
		return
	}
	for _, name := range st.put_ {
		if err := st.s.w.Node().DiscardBlob(st.ctx, name); err != nil {
			st.s.d.Logger.Warn("artifacts: discarding a refused call's bytes", "blob", name, "err", err)
		}
	}
}

// isFresh reports whether a call's operation is minted by the call itself.
func isFresh(c authority.Caller, opID string) bool {
	return c.Kind != authority.KindAgent && opID == ""
}

// put stores data, reads it back and checks it against its digest: only
// bytes that are there whole may be referred to by a version.
func (st *stager) put(p string, data []byte, typ string) (fileRef, error) {
	node := st.s.w.Node()
	st.n++
	name := fmt.Sprintf("%s.%d", st.op, st.n)
	st.put_ = append(st.put_, name)
	digest, err := node.PutBlob(st.ctx, name, data)
	if err != nil {
		return fileRef{}, authority.Refuse(authority.Unavailable, "The blob store did not take %s; no version was made. Make the same call again shortly.", p)
	}
	if _, err := node.Blob(st.ctx, name, digest); err != nil {
		st.s.d.Logger.Error("artifacts: a file read back does not match what was put", "path", p, "blob", name, "err", err)
		return fileRef{}, authority.Internal()
	}
	st.bytes += int64(len(data))
	return fileRef{Blob: name, Digest: digest, Size: len(data), Type: typ, By: st.by}, nil
}

// inlineFile checks, types and stores one inline file.
func (st *stager) inlineFile(field, p string, f *fileIn) (fileRef, error) {
	data, err := decode(field, f)
	if err != nil {
		return fileRef{}, err
	}
	st.inline += len(data)
	if st.inline > maxInline {
		return fileRef{}, authority.Refuse(authority.Invalid, "This call carries %d bytes inline (counted up to %s); a call carries at most %d (1 MiB) decoded. Put larger files in the project and publish them with source.", st.inline, field, maxInline).
			WithData("argument", field).WithData("limit", maxInline)
	}
	typ, err := typeOf(p, data, f.Type)
	if err != nil {
		return fileRef{}, err
	}
	return st.put(p, data, typ)
}

// inlineFiles stores a call's content (the main file) and files; a nil
// file (publish only) removes that path.
func (st *stager) inlineFiles(main, content string, files map[string]*fileIn, removals bool) (map[string]*fileRef, error) {
	out := map[string]*fileRef{}
	if content != "" {
		ref, err := st.inlineFile("content", main, &fileIn{Content: content})
		if err != nil {
			return nil, err
		}
		out[main] = &ref
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if len(paths) > maxFiles {
		return nil, authority.Refuse(authority.Invalid, "files names %d files; a version holds at most %d.", len(paths), maxFiles).WithData("argument", "files").WithData("limit", maxFiles)
	}
	for _, raw := range paths {
		p, err := cleanPath("files", raw)
		if err != nil {
			return nil, err
		}
		if _, dup := out[p]; dup {
			return nil, authority.Refuse(authority.Invalid, "files names %s twice (or also as content); name each file once.", p).WithData("argument", "files")
		}
		f := files[raw]
		if f == nil {
			if !removals {
				return nil, authority.Refuse(authority.Invalid, "files.%s is null; a new artifact has no file to remove.", p).WithData("argument", "files")
			}
			out[p] = nil
			continue
		}
		ref, err := st.inlineFile("files."+p, p, f)
		if err != nil {
			return nil, err
		}
		out[p] = &ref
	}
	return out, nil
}

// fromSource streams a source's files into the blob store: a project's
// file (which becomes the main file) or a directory of them (at their
// paths under it). Each is read verified from the project's blob and put
// again under this operation's own name, since a project file may be
// removed while the version still serves it.
func (st *stager) fromSource(r pebble.Reader, src *sourceIn, main string) (map[string]fileRef, error) {
	if src.Sandbox != "" {
		if src.Project != "" || src.Path != "" {
			return nil, authority.Refuse(authority.Invalid, "source is a project's files or the coding run's build, not both; send project and path, or sandbox.").WithData("argument", "source")
		}
		return st.fromSandbox(src.Sandbox)
	}
	if src.Project == "" || src.Path == "" {
		return nil, authority.Refuse(authority.Invalid, "source needs project and path (a project file, or a directory of them ending in /), or sandbox.").WithData("argument", "source")
	}
	list, err := tracker.ProjectFiles(r, src.Project, src.Path)
	if err != nil {
		return nil, authority.AsRefusal(err)
	}
	if len(list) == 0 {
		return nil, authority.Refuse(authority.Invalid, "source names %s in project %s, and it holds no file there.", src.Path, strings.ToUpper(src.Project)).WithData("argument", "source.path")
	}
	if len(list) > maxFiles {
		return nil, authority.Refuse(authority.Invalid, "source %s holds %d files; a version holds at most %d, and none is left out silently. Publish a smaller directory.", src.Path, len(list), maxFiles).
			WithData("argument", "source.path").WithData("limit", maxFiles)
	}
	dir := strings.TrimSuffix(strings.TrimPrefix(src.Path, "/"), "/")
	out := make(map[string]fileRef, len(list))
	var total int64
	for _, f := range list {
		total += int64(f.Size)
		if total > maxVersionBytes {
			return nil, authority.Refuse(authority.Invalid, "source %s holds more than %d bytes; a version holds at most that.", src.Path, maxVersionBytes).WithData("limit", maxVersionBytes)
		}
		p := main
		if strings.HasSuffix(src.Path, "/") {
			p = strings.TrimPrefix(strings.TrimPrefix(f.Path, dir), "/")
		}
		p, err := cleanPath("source.path", p)
		if err != nil {
			return nil, err
		}
		data, err := st.s.w.Node().Blob(st.ctx, f.Blob, f.Digest)
		if err != nil {
			st.s.d.Logger.Error("artifacts: a project file's bytes do not read back whole", "project", src.Project, "path", f.Path, "err", err)
			return nil, authority.Internal()
		}
		ref, err := st.put(p, data, f.Type)
		if err != nil {
			return nil, err
		}
		// The bytes are the project file's writers' words.
		if len(f.Writers) > 0 {
			ref.By = f.Writers[len(f.Writers)-1]
		}
		out[p] = ref
	}
	return out, nil
}

// readFile reads a file's bytes, checked against its digest.
func (s *srv) readFile(ctx context.Context, f fileRef) ([]byte, error) {
	data, err := s.w.Node().Blob(ctx, f.Blob, f.Digest)
	if err != nil {
		s.d.Logger.Error("artifacts: a file's bytes do not read back whole", "blob", f.Blob, "err", err)
		return nil, authority.Internal()
	}
	return data, nil
}

// page is one page of a text file from offset, ending on a whole line
// when one fits (else a whole character), and where the next starts (0 at
// the end). It never cuts silently: the caller says there is more.
func page(data []byte, offset, size int) (text string, next int) {
	end := min(len(data), offset+size)
	if end < len(data) {
		if nl := strings.LastIndexByte(string(data[offset:end]), '\n'); nl > 0 {
			end = offset + nl + 1
		}
		for end > offset && end < len(data) && !utf8.RuneStart(data[end]) {
			end--
		}
		next = end
	}
	return string(data[offset:end]), next
}
