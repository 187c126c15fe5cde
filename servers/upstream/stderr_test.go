package upstream

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// OUT-2: lines come out whole; a line past the limit comes out cut on a
// character boundary, saying how many bytes were left out; a read in tiny
// pieces or a last line with no newline changes nothing.
func TestReadLinesBoundsEachLine(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		limit    int
		want     []string
	}{
		{"whole lines", "one\ntwo\r\nthree", 8, []string{"one", "two", "three"}},
		{"empty lines", "\n\nx\n", 8, []string{"", "", "x"}},
		{"cut", "abcdefghij\nk\n", 4, []string{"abcd … [this line went on for 6 more bytes, not kept]", "k"}},
		// "é" is two bytes: a cut inside it leaves it out whole.
		{"cut inside a character", "abcé\n", 4, []string{"abc … [this line went on for 2 more bytes, not kept]"}},
		{"cut without newline", "abcdefgh", 4, []string{"abcd … [this line went on for 4 more bytes, not kept]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				var got []string
				readLines(r, tc.limit, func(l string) { got = append(got, l) })
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
					t.Fatalf("got %q\nwant %q", got, tc.want)
				}
			}
		})
	}
}

// A read error ends the reading like an end of file, with what was read.
func TestReadLinesStopsOnlyAtTheEnd(t *testing.T) {
	var got []string
	readLines(iotest.TimeoutReader(strings.NewReader("first\nsecond")), 64, func(l string) { got = append(got, l) })
	if fmt.Sprint(got) != "[first second]" {
		t.Fatalf("got %q", got)
	}
	got = nil
	readLines(io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("gone"))), 64, func(l string) { got = append(got, l) })
	if fmt.Sprint(got) != "[partial]" {
		t.Fatalf("got %q", got)
	}
}

// MCP-4, OUT-2: a real child that writes a 2 MiB stderr line keeps
// running and serving (the hub never stops reading, so its next write never
// meets a closed pipe); the line is logged cut, saying how much was left
// out, and the lines after it are logged as usual.
func TestInstanceSurvivesHugeStderrLine(t *testing.T) {
	in, logs := startTest(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_SHOUT": "1"}), func(o *Options) {
		o.Schedule = &Schedule{Base: time.Hour, Jitter: -1}
	})
	waitState(t, in, StateRunning, 10*time.Second)
	pid := in.childPID()
	const size = 2 << 20
	if text, err := callText(t, in, "shout", fmt.Sprintf(`{"bytes":%d}`, size)); err != nil || text != "shouted" {
		t.Fatalf("shout: %q %v", text, err)
	}
	if text, err := callText(t, in, "echo", `{"text":"after"}`); err != nil || text != "after" {
		t.Fatalf("echo after the long line: %q %v", text, err)
	}
	if in.childPID() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the child was replaced or died: pid %d, now %d", pid, in.childPID())
	}
	if ev := logs.events("server_exited"); len(ev) != 0 {
		t.Fatalf("server_exited %v", ev)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var cut, after bool
		for _, ev := range logs.events("server_stderr") {
			line := fmt.Sprint(ev["line"])
			if strings.HasPrefix(line, "xxxx") {
				want := fmt.Sprintf("[this line went on for %d more bytes, not kept]", size-maxStderrLine)
				if len(line) > maxStderrLine+100 || !strings.HasSuffix(line, want) {
					t.Fatalf("the long line was logged as %d bytes ending %q, want a cut ending %q", len(line), line[max(0, len(line)-80):], want)
				}
				cut = true
			}
			after = after || line == "still here after shouting"
		}
		if cut && after {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr events: cut line %v, line after it %v", cut, after)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
