// Package sandbox is the box a coding run works in: a bubblewrap (bwrap)
// sandbox around a fresh workspace directory of its own.
//
// What a box holds: the workspace, a git repository bound read-write at
// /workspace (the commits made there are what a run delivers); the
// system's /usr and the few /etc files a toolchain needs, read-only; an
// empty /tmp and /home/box of its own. Nothing else of the host is inside
// — not the hub's data directory, its tokens or sealed secrets — and the
// box shares no namespace with the host: no network at all, not even the
// host's loopback, unless Config.Network is "host".
//
// Every command run in a box is held to its Limits: wall time and the
// output it may write are watched here; CPU seconds, address space and
// file size are the kernel's rlimits (prlimit); processes and memory are a
// cgroup's where the machine offers one (else the per-user process rlimit
// stands for the first). A run that reaches a limit is killed whole: its
// own process group, its pid namespace (bwrap --die-with-parent) and, with
// a cgroup, every process the cgroup still holds.
//
// The host side reads and writes the workspace only through paths held to
// it: a path that is absolute, climbs out with "..", or passes through a
// symbolic link is refused in words, and a directory is listed by a
// command run inside the box itself.
//
// Ownership and concurrency: a Box belongs to whoever opened it and is
// removed by Close (the process group killed, the workspace and cgroup
// removed), which is safe twice. Run, ReadFile, WriteFile, List and Open
// may be called from several goroutines, but runs of one box share its
// workspace and limits.
package sandbox
