package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/sandbox"
)

// source.sandbox: a version built in the turn's coding run. The build is
// read through the run's box and nothing else: the box lists the
// directory itself (a link or special file under it refuses the whole
// build, and so does one file more than a version holds), every path is
// held to the workspace, and each file is streamed out of it by the
// engine and put in the blob store verified like any other. The box is
// never handed an upload URL or anything of the store.

// Builds reaches the box of the coding run a caller's turn made last. The
// engine's agent runtime implements it; this package never imports it.
type Builds interface {
	// Build is the box of the latest coding run of the turn c's call
	// belongs to, while that turn runs; nil when it has none.
	Build(c authority.Caller) BuildBox
}

// BuildBox is what publishing reads of a box (package sandbox's Box).
type BuildBox interface {
	BuildFiles(ctx context.Context, rel string, max int) ([]sandbox.Entry, error)
	Open(rel string) (io.ReadCloser, int64, error)
}

// fromSandbox streams a build directory of the caller's turn's coding run
// into the blob store, at the files' paths under it.
func (st *stager) fromSandbox(dir string) (map[string]fileRef, error) {
	if st.s.d.Builds == nil {
		return nil, authority.Refuse(authority.Unavailable, "source.sandbox needs the turn's coding run, and this node runs no sandbox; nothing was published. Publish inline content or files, or a project's files with source.project and source.path.")
	}
	box := st.s.d.Builds.Build(st.caller)
	if box == nil {
		return nil, authority.Refuse(authority.Invalid, "source.sandbox reads the build of this turn's coding run, and this turn has none whose box is still there (a box is readable from when run_sandbox answers until the turn ends); call run_sandbox first.").
			WithData("argument", "source.sandbox")
	}
	files, err := box.BuildFiles(st.ctx, dir, maxFiles)
	if err != nil {
		return nil, sandboxRefusal(err)
	}
	if len(files) == 0 {
		return nil, authority.Refuse(authority.Invalid, "source.sandbox names %s, and the build holds no file there.", dir).WithData("argument", "source.sandbox")
	}
	base, _ := sandbox.Rel(dir)
	out := make(map[string]fileRef, len(files))
	var total int64
	for _, f := range files {
		total += f.Size
		if total > maxVersionBytes {
			return nil, authority.Refuse(authority.Invalid, "the build %s holds more than %d bytes; a version holds at most that.", dir, maxVersionBytes).WithData("limit", maxVersionBytes)
		}
		p := f.Path
		if base != "." {
			p = strings.TrimPrefix(p, base+"/")
		}
		p, err := cleanPath("source.sandbox", p)
		if err != nil {
			return nil, err
		}
		data, err := readBuildFile(box, f)
		if err != nil {
			return nil, err
		}
		typ, err := typeOf(p, data, "")
		if err != nil {
			return nil, err
		}
		ref, err := st.put(p, data, typ)
		if err != nil {
			return nil, err
		}
		out[p] = ref
	}
	return out, nil
}

// readBuildFile reads one listed file whole through the box: a file that
// is not the size it was listed at changed while it was published, and
// refuses the build rather than publish a half-written file.
func readBuildFile(box BuildBox, f sandbox.Entry) ([]byte, error) {
	rc, size, err := box.Open(f.Path)
	if err != nil {
		return nil, sandboxRefusal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, f.Size+1))
	if err == nil && (size != f.Size || int64(len(data)) != f.Size) {
		err = fmt.Errorf("%s changed while it was read (listed at %d bytes, read %d)", f.Path, f.Size, len(data))
	}
	if err != nil {
		return nil, authority.Refuse(authority.Conflict, "The build's file %s could not be read whole (%v); nothing was published. Publish it again once the run has stopped writing it.", f.Path, err).
			WithData("argument", "source.sandbox")
	}
	return data, nil
}

// sandboxRefusal is a box's answer as a refusal: the box refuses in
// words (a link, a path leaving the workspace, one file too many); any
// other failure is the box's own.
func sandboxRefusal(err error) error {
	var r *authority.Refusal
	if errors.As(err, &r) {
		return r.WithData("argument", "source.sandbox")
	}
	return authority.Refuse(authority.Invalid, "The build could not be read from the box: %v. Nothing was published.", err).WithData("argument", "source.sandbox")
}
