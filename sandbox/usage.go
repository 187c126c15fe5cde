package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A box's commands may lock a directory they made (chmod 000), which would
// stop the host, when it does not run as root, from counting the workspace
// and from removing it. So the host walks the workspace by descriptor,
// each directory opened beneath the one above it without following a
// link, and gives the owner read, write and search back on a directory
// before it enters it. No host path is ever named in what it says: the
// errors are the kernel's words alone.

// maxCountDepth is how deep the workspace's directories are counted: each
// level holds a descriptor while the walk is in it, and a node's limit on
// them may be as low as 1024. No source tree nests near it; a workspace
// nested deeper cannot be counted, and is held as past its disk and file
// limits.
const maxCountDepth = 256

var errTooDeep = fmt.Errorf("its directories nest more than %d deep", maxCountDepth)

// Usage is what the workspace holds.
type Usage struct {
	Bytes int64 // on disk, in whole blocks
	Files int   // files, directories and links
}

// DiskUsage counts the workspace against the box's disk and file limits,
// without following a link. Its error names no host path; a workspace it
// cannot count is to be held as past both limits.
func (b *Box) DiskUsage() (Usage, error) {
	var u Usage
	err := walkUnlocking(b.ws, maxCountDepth, func(st *unix.Stat_t) {
		u.Files++
		u.Bytes += st.Blocks * 512
	})
	return u, err
}

// unlockTree gives the owner rwx back on every directory under root, so
// that it can be removed; a missing root is nothing to do.
func unlockTree(root string) error {
	err := walkUnlocking(root, -1, nil)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// walkUnlocking visits every entry under root (not root itself), at most
// depth levels down (-1 for no bound), unlocking each directory before it
// reads it.
func walkUnlocking(root string, depth int, visit func(*unix.Stat_t)) error {
	pfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	err = unix.Fstat(pfd, &st)
	if err == nil {
		err = unlock(pfd, st.Mode)
	}
	_ = unix.Close(pfd)
	if err != nil {
		return err
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return walkDir(fd, depth, visit)
}

// walkDir visits the entries of the directory open as fd, and closes it.
func walkDir(fd int, depth int, visit func(*unix.Stat_t)) error {
	dir := os.NewFile(uintptr(fd), "directory")
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return bare(err)
	}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed by a run while counted
			}
			return err
		}
		if visit != nil {
			visit(&st)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		if depth == 0 {
			return errTooDeep
		}
		sub, err := openUnlocked(fd, name, st.Mode)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return err
		}
		if err := walkDir(sub, depth-1, visit); err != nil {
			return err
		}
	}
	return nil
}

// openUnlocked opens the directory name under dirfd for reading, never
// through a link, having given its owner rwx back where it lacked them.
func openUnlocked(dirfd int, name string, mode uint32) (int, error) {
	if mode&0o700 != 0o700 {
		p, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		err = unlock(p, mode)
		_ = unix.Close(p)
		if err != nil {
			return -1, err
		}
	}
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// unlock gives the owner rwx on the directory held by the O_PATH
// descriptor pfd (its mode as it stood): chmod through the descriptor's
// own /proc entry, so it is that directory changed and nothing a link in
// its place would name.
func unlock(pfd int, mode uint32) error {
	if mode&0o700 == 0o700 {
		return nil
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(pfd), mode&0o7777|0o700)
}

// bare is err without the path an *fs.PathError carries.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
