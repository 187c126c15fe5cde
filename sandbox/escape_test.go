package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
)

// Each test here is a real bwrap run trying to get out of its box or past
// one of its limits, and each fails when the limit it names is removed.

// refused checks err is an invalid refusal whose sentence says want.
func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !errors.Is(err, authority.ErrInvalid) {
		t.Fatalf("%s: %v, want refused invalid", what, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: %q does not say %q", what, err, want)
	}
}

// The hub's data directory and an operator token beside the workspace are
// not inside the box: a command cannot read them by path, the host-side
// reads refuse paths leaving the workspace, and the hub's own environment
// (its token) is not handed in (ENV-1).
func TestEscapeHubDataAndTokenUnreachable(t *testing.T) {
	data := t.TempDir()
	token := filepath.Join(data, "operator.token")
	if err := os.WriteFile(token, []byte("tok-not-for-the-box\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := append(os.Environ(), "CREWLET_OPERATOR_TOKEN=tok-not-for-the-box")
	ctx := context.Background()
	// The workspace lives under the data directory on the host, as the
	// hub keeps it: only the workspace itself is bound.
	b := openBoxIn(t, Config{}, filepath.Join(data, "boxes"), Env(host, map[string]string{"RUN_VAR": "named"}))
	res, err := b.Run(ctx, []string{"sh", "-c", `cat "$1"; ls "$2"; ls ../..; env`, "sh", token, data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Transcript, "tok-not-for-the-box") || strings.Contains(res.Transcript, "operator.token") {
		t.Fatalf("the box read the hub's data:\n%s", res.Transcript)
	}
	if !strings.Contains(res.Stderr, "No such file or directory") {
		t.Fatalf("the reads should have found nothing; stderr %q", res.Stderr)
	}
	if !strings.Contains(res.Transcript, "RUN_VAR=named") || !strings.Contains(res.Transcript, "HOME="+Home) {
		t.Fatalf("the run's own variables are missing:\n%s", res.Transcript)
	}
	rel, err := filepath.Rel(b.Dir(), token)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.ReadFile(rel)
	refused(t, "ReadFile "+rel, err, "climbs out of the workspace")
	_, _, err = b.Open(token)
	refused(t, "Open "+token, err, "is outside the workspace")
	_, err = b.List(ctx, "..")
	refused(t, "List ..", err, "climbs out of the workspace")
	refused(t, "WriteFile ../x", b.WriteFile("../x", []byte("x")), "climbs out of the workspace")
}

// An operator may keep the coding CLI beside the company file, whose data
// directory holds the hub's operator token: only the executable is bound
// into the box, so the CLI runs there and the token beside it is not to be
// read. A command naming the CLI by a relative path (bound where? the
// hub's working directory is not the box's) is refused in words.
func TestEscapeSecretBesideTheCLIUnreachable(t *testing.T) {
	site := t.TempDir()
	cli := filepath.Join(site, "opencode")
	if err := os.WriteFile(cli, []byte("#!/bin/sh\necho the CLI ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(site, ".crewlet", "operator.token")
	if err := os.MkdirAll(filepath.Dir(token), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("tok-not-for-the-box\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := openBox(t, Config{Agent: AgentSpec{CLI: "opencode", Command: cli}})
	res, err := b.Run(context.Background(), []string{"sh", "-c", `"$1"; cat "$2"; ls -a "$3"`, "sh", cli, token, site}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Transcript, "the CLI ran") {
		t.Fatalf("the CLI did not run in the box: %q %q", res.Transcript, res.Stderr)
	}
	if strings.Contains(res.Transcript, "tok-not-for-the-box") || strings.Contains(res.Transcript, ".crewlet") {
		t.Fatalf("the box read what lies beside the CLI:\n%s", res.Transcript)
	}

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, cli)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), Config{Agent: AgentSpec{CLI: "opencode", Command: rel}}, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "sandbox.agent.command: "+strconv.Quote(rel)+" is not an absolute path") {
		t.Fatalf("a relative command: %v", err)
	}
}

// A link the box lays to /etc/shadow, or the host lays to a token, is
// never followed by the host: reading, opening, listing under and
// publishing it are refused in words.
func TestEscapeSymlinkToShadowRefused(t *testing.T) {
	b := openBox(t, Config{})
	ctx := context.Background()
	res := run(t, b, `ln -s /etc/shadow leak && ln -s / root && mkdir build && echo ok > build/ok.txt && ln -s /etc/shadow build/shadow`)
	if res.Exit != 0 {
		t.Fatalf("exit %d: %s", res.Exit, res.Stderr)
	}
	_, err := b.ReadFile("leak")
	refused(t, "ReadFile leak", err, "is a symbolic link")
	_, _, err = b.Open("leak")
	refused(t, "Open leak", err, "is a symbolic link")
	_, err = b.ReadFile("root/etc/shadow")
	refused(t, "ReadFile root/etc/shadow", err, "is a symbolic link")
	_, err = b.List(ctx, "root/etc")
	refused(t, "List root/etc", err, "is a symbolic link")
	refused(t, "WriteFile root/tmp/x", b.WriteFile("root/tmp/x", []byte("x")), "is a symbolic link")
	_, err = b.BuildFiles(ctx, "build", 10)
	refused(t, "BuildFiles build", err, `"build/shadow" in the build is a symbolic link`)

	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(b.Dir(), "hostlink")); err != nil {
		t.Fatal(err)
	}
	_, err = b.ReadFile("hostlink")
	refused(t, "ReadFile hostlink", err, "is a symbolic link")
}

// A listener on the host's loopback is out of reach from a box without
// network; the same connection from a box given the host's network is
// made, so the test sees a connection when there is one.
func TestEscapeHostLoopbackUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	dial := `exec 3<>/dev/tcp/127.0.0.1/` + port + ` && echo connected`

	boxed := openBox(t, Config{})
	res := run(t, boxed, "bash -c '"+dial+"'")
	if res.Exit == 0 || strings.Contains(res.Transcript, "connected") {
		t.Fatalf("a box without network reached the host's loopback: exit %d, %q", res.Exit, res.Transcript)
	}

	open := openBox(t, Config{Network: NetworkHost})
	res = run(t, open, "bash -c '"+dial+"'")
	if res.Exit != 0 || !strings.Contains(res.Transcript, "connected") {
		t.Fatalf("network host: exit %d, %q, %q", res.Exit, res.Transcript, res.Stderr)
	}
	<-accepted
	select {
	case <-accepted:
		t.Fatal("two connections reached the listener; the box without network made one")
	default:
	}
}

// boxProcesses lists the processes whose command line holds marker.
func boxProcesses(marker string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// A fork bomb meets the process limit, the run is killed whole at its wall
// limit, and not one of its processes is left. Each shell of the bomb
// forks two more again as soon as they end, as a bomb does; it is bounded
// at ten doublings, each leaf sleeping, so that trying it without the
// limit cannot take the machine down.
func TestEscapeForkBombHeld(t *testing.T) {
	b := openBox(t, Config{Limits: Limits{Processes: 32, Wall: 3 * time.Second}})
	marker := fmt.Sprintf("bomb%d", time.Now().UnixNano())
	script := `f(){ if [ "$1" -ge 10 ]; then exec sleep 3600; fi; while :; do f $(($1+1)) & f $(($1+1)) & wait; done; }; f 0 # ` + marker
	// bash, since dash gives up its whole script on one refused fork.
	res := run(t, b, "exec bash -c '"+script+"'")
	if !slices.Contains(res.Reached, LimitProcesses) {
		t.Fatalf("the bomb never met the process limit: reached %v, killed %q, stderr %q", res.Reached, res.Killed, tail(res.Stderr))
	}
	if res.Killed != LimitWall || res.Exit != -1 {
		t.Fatalf("killed %q exit %d, want the wall limit", res.Killed, res.Exit)
	}
	if !strings.Contains(res.Why, "limit of 32 processes") {
		t.Fatalf("why: %q", res.Why)
	}
	if left := boxProcesses(marker); len(left) > 0 {
		t.Fatalf("%d processes outlived the run: %v", len(left), left)
	}
	if left := boxProcesses("sleep\x003600"); len(left) > 0 {
		t.Fatalf("%d sleepers outlived the run: %v", len(left), left)
	}
}

func tail(s string) string {
	if len(s) > 400 {
		return s[len(s)-400:]
	}
	return s
}

// A memory hog doubling a string towards 1 GiB is stopped at the memory
// limit, and the run says so where the box has a memory group.
func TestEscapeMemoryHogHeld(t *testing.T) {
	b := openBox(t, Config{Limits: Limits{MemoryMB: 128, Wall: time.Minute}})
	res := run(t, b, `exec awk 'BEGIN { s = "x"; while (length(s) < 1073741824) { s = s s; print length(s); fflush() } print "survived" }'`)
	if strings.Contains(res.Transcript, "survived") || res.Exit == 0 {
		t.Fatalf("the hog reached 1 GiB under a 128 MiB limit: exit %d", res.Exit)
	}
	lines := strings.Fields(res.Transcript)
	if len(lines) == 0 {
		t.Fatalf("the hog printed nothing: %q", res.Stderr)
	}
	if last, _ := strconv.Atoi(lines[len(lines)-1]); last > 128<<20 {
		t.Fatalf("the hog held a %d-byte string under a 128 MiB limit", last)
	}
	if b.cg.memory != "" && !slices.Contains(res.Reached, LimitMemory) {
		t.Fatalf("the memory group was not met: reached %v, exit %d, stderr %q", res.Reached, res.Exit, res.Stderr)
	}
}

// An endless output is stopped by the output limit long before the wall,
// its transcript its head and tail in whole lines with the middle counted.
func TestEscapeEndlessOutputClipped(t *testing.T) {
	b := openBox(t, Config{Limits: Limits{OutputMB: 4, Wall: 20 * time.Second}})
	res := run(t, b, `exec yes 'a line of endless output'`)
	if res.Killed != LimitOutput || res.Exit != -1 {
		t.Fatalf("killed %q, exit %d after %s; want the output limit", res.Killed, res.Exit, res.Duration)
	}
	if res.OutputBytes != 4<<20 {
		t.Fatalf("output counted %d bytes, want the 4 MiB limit", res.OutputBytes)
	}
	if res.TranscriptLinesLeftOut == 0 || len(res.Transcript) > TranscriptHead+TranscriptTail+200 {
		t.Fatalf("transcript %d bytes, %d lines left out", len(res.Transcript), res.TranscriptLinesLeftOut)
	}
	const line = "a line of endless output\n"
	head, rest, ok := strings.Cut(res.Transcript, "[... ")
	if !ok {
		t.Fatal("the transcript does not say what it left out")
	}
	marker, tailPart, _ := strings.Cut(rest, "\n")
	// 4 MiB is not a whole number of lines: the line the limit cut is
	// said after the tail, not kept as half a line.
	cutLen := int64((4 << 20) % len(line))
	tailPart, cutNote, ok := strings.Cut(tailPart, "\n[... the stream was stopped inside its last line; ")
	if !ok || cutNote != fmt.Sprintf("its %d bytes are left out ...]\n", cutLen) {
		t.Fatalf("the cut last line is not said: %q", cutNote)
	}
	if head != strings.Repeat(line, len(head)/len(line)) || tailPart != strings.Repeat(line, len(tailPart)/len(line)) {
		t.Fatal("the transcript's head or tail is not whole lines")
	}
	if len(head) > TranscriptHead || len(head) < TranscriptHead-len(line) || len(tailPart) > TranscriptTail || len(tailPart) < TranscriptTail-len(line) {
		t.Fatalf("head %d bytes, tail %d bytes", len(head), len(tailPart))
	}
	kept := int64(len(head) + len(tailPart))
	if want := fmt.Sprintf("%d lines (%d bytes) of the middle left out ...]", res.TranscriptLinesLeftOut-1, res.TranscriptBytesLeftOut-cutLen); marker != want {
		t.Fatalf("marker %q, want %q", marker, want)
	}
	if kept+res.TranscriptBytesLeftOut != res.OutputBytes {
		t.Fatalf("kept %d + left out %d != written %d", kept, res.TranscriptBytesLeftOut, res.OutputBytes)
	}
}

// A file written past the file-size limit stops at it, and the run says
// it ran into it; the host-side write is refused past it too.
func TestEscapeFileSizeHeld(t *testing.T) {
	b := openBox(t, Config{Limits: Limits{FileMB: 1}})
	res := run(t, b, `head -c 5000000 /dev/zero > big`)
	fi, err := os.Stat(filepath.Join(b.Dir(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 1<<20 {
		t.Fatalf("big is %d bytes under a 1 MiB limit", fi.Size())
	}
	if !slices.Contains(res.Reached, LimitFileSize) || !strings.Contains(res.Why, "file-size limit of 1 MiB") {
		t.Fatalf("reached %v, why %q, exit %d", res.Reached, res.Why, res.Exit)
	}
	refused(t, "WriteFile 2 MiB", b.WriteFile("big2", make([]byte, 2<<20)), "file-size limit of 1 MiB")
}

// A process spinning past its CPU seconds is stopped by the kernel, and
// the run says which limit.
func TestEscapeCPUHeld(t *testing.T) {
	b := openBox(t, Config{Limits: Limits{CPUSeconds: 1, Wall: time.Minute}})
	res := run(t, b, `exec sh -c 'while :; do :; done'`)
	if !slices.Contains(res.Reached, LimitCPU) || res.Killed != "" {
		t.Fatalf("reached %v, killed %q, exit %d after %s", res.Reached, res.Killed, res.Exit, res.Duration)
	}
}

// One file more than a version holds refuses the build whole.
func TestBuildOneFileMoreThanAVersionHoldsRefused(t *testing.T) {
	b := openBox(t, Config{})
	ctx := context.Background()
	run(t, b, `mkdir -p build/sub && for i in 1 2 3 4; do echo $i > build/f$i; done && echo 5 > build/sub/f5`)
	files, err := b.BuildFiles(ctx, "build", 5)
	if err != nil || len(files) != 5 {
		t.Fatalf("five files where a version holds five: %v %v", files, err)
	}
	run(t, b, `echo 6 > build/sub/f6`)
	_, err = b.BuildFiles(ctx, "build", 5)
	refused(t, "six files", err, "holds 6 files; a version holds at most 5")
}
