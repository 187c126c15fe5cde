package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/crewlet/hub/authority"
	"golang.org/x/sys/unix"
)

// beneath is how every host-side path is resolved in the workspace: never
// above it, never through a symbolic link (a link the box made may name
// any file of the host, since the host resolves it), never through a
// magic link in /proc or onto another mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Rel holds a path to the workspace by its spelling: relative to it, or
// under /workspace as the box names it; never absolute elsewhere, never
// climbing out with "..". It returns the path cleaned, "." for the
// workspace itself.
func Rel(path string) (string, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return "", authority.Refuse(authority.Invalid, "the path holds a NUL byte, which no file name can.")
	}
	p := path
	if p == Workspace || strings.HasPrefix(p, Workspace+"/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, Workspace), "/")
	}
	if filepath.IsAbs(p) {
		return "", authority.Refuse(authority.Invalid, "%q is outside the workspace: a path in the box is relative to the workspace (%s), and nothing else of the machine is reachable.", path, Workspace)
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", authority.Refuse(authority.Invalid, "%q climbs out of the workspace with \"..\"; a path in the box stays inside its workspace (%s).", path, Workspace)
	}
	if c == "" {
		c = "."
	}
	return c, nil
}

// open opens rel in the workspace with flags, held beneath it, and says
// why not in words.
func (b *Box) open(rel string, flags int, mode uint32) (*os.File, error) {
	if b.isClosed() {
		return nil, errClosed
	}
	// O_PATH: the workspace is a place to resolve from, whatever
	// permissions a command left on it; and its error names no host path.
	root, err := unix.Open(b.ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the workspace cannot be opened: %w", err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: beneath})
	if err != nil {
		return nil, pathError(rel, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(Workspace, rel)), nil
}

// pathError says why rel could not be opened in the workspace.
func pathError(rel string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return authority.Refuse(authority.Invalid, "%q is a symbolic link, or passes through one; the workspace's files are read and written only by paths inside it, and a link may name any file of the machine.", rel)
	case errors.Is(err, unix.EXDEV):
		return authority.Refuse(authority.Invalid, "%q leads out of the workspace.", rel)
	case errors.Is(err, unix.ENOENT):
		return authority.Refuse(authority.NotFound, "%q does not exist in the workspace.", rel)
	case errors.Is(err, unix.ENOTDIR):
		return authority.Refuse(authority.Invalid, "a part of %q is a file, not a directory.", rel)
	case errors.Is(err, unix.EISDIR):
		return authority.Refuse(authority.Invalid, "%q is a directory, not a file.", rel)
	case errors.Is(err, unix.EACCES):
		return authority.Refuse(authority.Invalid, "%q cannot be reached: a command in the box took away the permission to it or to a directory on its way (chmod); a command can give it back (chmod u+rwx).", rel)
	case errors.Is(err, unix.ENOSYS):
		return errors.New("this kernel cannot hold a path beneath a directory (openat2, Linux 5.6), so the box's files cannot be reached safely")
	}
	return err
}

// openRegular opens rel for reading and refuses anything but a regular
// file: a pipe would hold the reader forever, a device is not the box's.
func (b *Box) openRegular(rel string) (*os.File, int64, error) {
	c, err := Rel(rel)
	if err != nil {
		return nil, 0, err
	}
	f, err := b.open(c, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, authority.Refuse(authority.Invalid, "%q is a %s, not a file.", c, kindOf(fi.Mode()))
	}
	return f, fi.Size(), nil
}

// Open opens a file of the workspace for streaming, with its size as it
// stands now; the publish pipeline reads a build through it.
func (b *Box) Open(rel string) (io.ReadCloser, int64, error) {
	return b.openRegular(rel)
}

// ReadFile is a file of the workspace whole. Past MaxLine (32 MiB) it is
// refused, said by its size: a report or result read back whole must be
// whole; stream a larger file with Open.
func (b *Box) ReadFile(rel string) ([]byte, error) {
	f, size, err := b.openRegular(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > MaxLine {
		return nil, tooLong(rel, size)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxLine+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxLine {
		return nil, tooLong(rel, int64(len(data)))
	}
	return data, nil
}

func tooLong(rel string, size int64) error {
	return authority.Refuse(authority.Invalid, "%q holds %d bytes, past the %d MiB a file read back whole may hold; nothing of it was read. Have the run write it shorter, or publish it as a build.", rel, size, MaxLine>>20).WithData("limit", MaxLine)
}

// WriteFile writes data to a file of the workspace, making its
// directories. It is refused past the box's file-size limit, past its disk
// or file limits, and where the path is not the workspace's.
func (b *Box) WriteFile(rel string, data []byte) error {
	c, err := Rel(rel)
	if err != nil {
		return err
	}
	if c == "." {
		return authority.Refuse(authority.Invalid, "name a file to write, not the workspace itself.")
	}
	l := b.cfg.Limits
	if int64(len(data)) > int64(l.FileMB)<<20 {
		return authority.Refuse(authority.Invalid, "%q would hold %d bytes, past the box's file-size limit of %d MiB.", c, len(data), l.FileMB).WithData("limit", l.FileMB)
	}
	u, err := b.DiskUsage()
	if err != nil {
		return authority.Refuse(authority.Invalid, "the workspace cannot be counted (%v), so it is held as past its disk limit of %d MiB and its limit of %d files; nothing was written. Remove what the last commands left there first.", err, l.DiskMB, l.Files).WithData("limit", l.Files)
	}
	if u.Bytes+int64(len(data)) > int64(l.DiskMB)<<20 {
		return authority.Refuse(authority.Invalid, "the workspace holds %d bytes; %d more would pass its disk limit of %d MiB.", u.Bytes, len(data), l.DiskMB).WithData("limit", l.DiskMB)
	}
	if u.Files >= l.Files {
		return authority.Refuse(authority.Invalid, "the workspace holds %d files and directories, its limit; remove some first.", u.Files).WithData("limit", l.Files)
	}
	if dir := filepath.Dir(c); dir != "." {
		if err := b.mkdirAll(dir); err != nil {
			return err
		}
	}
	f, err := b.open(c, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return err
		}
		return authority.Refuse(authority.Invalid, "%q is a %s, not a file.", c, kindOf(fi.Mode()))
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mkdirAll makes dir and its parents in the workspace, each held beneath
// it as open holds a file.
func (b *Box) mkdirAll(dir string) error {
	parts := strings.Split(dir, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		d, err := b.open(sub, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err == nil {
			d.Close()
			continue
		}
		if !errors.Is(err, authority.ErrNotFound) {
			return err
		}
		parent := "."
		if i > 0 {
			parent = strings.Join(parts[:i], "/")
		}
		p, err := b.open(parent, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(p.Fd()), parts[i], 0o755)
		p.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("making %s in the workspace: %w", sub, err)
		}
	}
	return nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
