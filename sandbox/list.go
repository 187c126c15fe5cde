package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/crewlet/hub/authority"
	"golang.org/x/sys/unix"
)

// Entry is one thing under a listed directory.
type Entry struct {
	// Path is relative to the workspace.
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other" (a pipe, socket or
	// device).
	Type string `json:"type"`
	// Size is a file's size in bytes (a link's, its target's name).
	Size int64 `json:"size"`
}

// maxListBytes bounds a listing's names together: a directory whose
// listing passes it is refused rather than listed in part.
const maxListBytes = 16 << 20

// List is everything under a directory of the workspace, depth first,
// listed by a command run inside the box itself: the host never walks a
// tree the box may have laid links in. rel must be a directory held to
// the workspace (not a link to one).
func (b *Box) List(ctx context.Context, rel string) ([]Entry, error) {
	c, err := Rel(rel)
	if err != nil {
		return nil, err
	}
	d, err := b.open(c, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	d.Close()
	var out bytes.Buffer
	lim := &limitedBuffer{buf: &out, max: maxListBytes}
	// ./ keeps a name starting with "-" from reading as find's option;
	// %P is the path under it.
	res, err := b.run(ctx, []string{"find", "./" + c, "-mindepth", "1", "-printf", `%y %s %P\0`}, nil, runOptions{raw: lim, internal: true})
	if err != nil {
		return nil, err
	}
	if lim.over {
		return nil, authority.Refuse(authority.Invalid, "%q holds more entries than one listing carries (%d MiB of names); list a directory under it.", c, maxListBytes>>20).WithData("limit", maxListBytes)
	}
	if res.Exit != 0 {
		return nil, fmt.Errorf("listing %s in the box ended %d: %s", c, res.Exit, strings.TrimSpace(res.Stderr))
	}
	var entries []Entry
	for _, rec := range bytes.Split(out.Bytes(), []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		f := strings.SplitN(string(rec), " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("the box listed %q, which is not an entry", rec)
		}
		size, _ := strconv.ParseInt(f[1], 10, 64)
		p := f[2]
		if c != "." {
			p = c + "/" + p
		}
		entries = append(entries, Entry{Path: p, Type: entryType(f[0]), Size: size})
	}
	return entries, nil
}

func entryType(y string) string {
	switch y {
	case "f":
		return "file"
	case "d":
		return "dir"
	case "l":
		return "symlink"
	}
	return "other"
}

// BuildFiles is the files of a build directory, for publishing: listed
// through the box, every one a regular file inside the workspace. A link
// or special file anywhere under it refuses the whole build, and so does
// one file more than max (what one version holds): a build is published
// whole or not at all, never truncated.
func (b *Box) BuildFiles(ctx context.Context, rel string, max int) ([]Entry, error) {
	entries, err := b.List(ctx, rel)
	if err != nil {
		return nil, err
	}
	var files []Entry
	for _, e := range entries {
		switch e.Type {
		case "dir":
		case "file":
			files = append(files, e)
		case "symlink":
			return nil, authority.Refuse(authority.Invalid, "%q in the build is a symbolic link; a build publishes only files inside the workspace, and a link may name any file of the machine. Copy the file in its place.", e.Path)
		default:
			return nil, authority.Refuse(authority.Invalid, "%q in the build is not a file (a pipe, socket or device); remove it from the build directory.", e.Path)
		}
	}
	if err := CheckCount(rel, len(files), max); err != nil {
		return nil, err
	}
	return files, nil
}

// CheckCount refuses a build of n files where a version holds max: one
// file more is refused, never dropped.
func CheckCount(rel string, n, max int) error {
	if n > max {
		return authority.Refuse(authority.Invalid, "the build directory %q holds %d files; a version holds at most %d, and none is left out silently. Publish a smaller directory.", rel, n, max).WithData("limit", max)
	}
	return nil
}

// limitedBuffer takes up to max bytes and notes that more came.
type limitedBuffer struct {
	buf  *bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); len(p) > room {
		l.buf.Write(p[:max(room, 0)])
		l.over = true
		return len(p), nil
	}
	return l.buf.Write(p)
}

// Refs is the commits a run delivered, newest first, each "hash subject",
// within MaxRefs bytes of whole refs; the rest counted.
type Refs struct {
	Refs    []string `json:"refs"`
	LeftOut int      `json:"left_out,omitempty"`
}

// MaxRefs bounds a run's delivered refs together.
const MaxRefs = 16 << 10

// Commits is what the run delivered: the commits in the workspace's
// repository, made by its agent (the repository starts with none).
func (b *Box) Commits(ctx context.Context) (Refs, error) {
	var out bytes.Buffer
	lim := &limitedBuffer{buf: &out, max: maxListBytes}
	res, err := b.run(ctx, []string{"sh", "-c", `git rev-parse -q --verify HEAD >/dev/null || exit 0; exec git log --no-color --format='%H %s'`}, nil, runOptions{raw: lim, internal: true})
	if err != nil {
		return Refs{}, err
	}
	if res.Exit != 0 {
		return Refs{}, fmt.Errorf("reading the workspace's commits ended %d: %s", res.Exit, strings.TrimSpace(res.Stderr))
	}
	var r Refs
	size := 0
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		if size+len(line)+1 > MaxRefs || r.LeftOut > 0 {
			r.LeftOut++
			continue
		}
		size += len(line) + 1
		r.Refs = append(r.Refs, line)
	}
	return r, nil
}
