package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
)

func TestParseLevels(t *testing.T) {
	for in, want := range map[string]string{
		"1,8,64":    "[1 8 64]",
		" 2 , 3 ":   "[2 3]",
		"1024":      "[1024]",
		"5,5":       "[5 5]",
		"1,   1024": "[1 1024]",
	} {
		got, err := parseLevels(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("parseLevels(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "1025", "x", "1,,2", "1;2", "1.5"} {
		if got, err := parseLevels(in); err == nil || !strings.Contains(err.Error(), "--sessions") {
			t.Errorf("parseLevels(%q) = %v, %v; want an error naming --sessions", in, got, err)
		}
	}
}

func TestListFlagTakesOnlyPairs(t *testing.T) {
	var l listFlag
	for _, v := range []string{"GOGC=400", "EMPTY=", "A=B=C"} {
		if err := l.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if err := l.Set("GOGC"); err == nil {
		t.Fatal("a value without = was taken")
	}
	if l.String() != "GOGC=400,EMPTY=,A=B=C" {
		t.Fatalf("flag holds %q", l.String())
	}
}

// The company the harness writes is one the hub accepts as it is: two
// echo servers behind distinct prefixes and one admin token from tokenVar.
func TestCompanyIsAValidCompany(t *testing.T) {
	c, err := config.Parse([]byte(company("http://127.0.0.1:9/mcp", "/usr/local/bin/crewlet-load")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.MCPServers); n != 2 {
		t.Fatalf("%d servers", n)
	}
	tokens, err := c.OperatorTokens(func(k string) (string, bool) { return "the-token", k == tokenVar })
	if err != nil || len(tokens) != 1 || tokens[0].Secret != "the-token" || !tokens[0].Admin {
		t.Fatalf("operator tokens %+v, %v", tokens, err)
	}
	for _, want := range []string{"tool_prefix: http_", "tool_prefix: stdio_", `url: "http://127.0.0.1:9/mcp"`,
		`command: "/usr/local/bin/crewlet-load"`, "args: [echo-server, --stdio]"} {
		if !strings.Contains(company("http://127.0.0.1:9/mcp", "/usr/local/bin/crewlet-load"), want) {
			t.Errorf("company lacks %q", want)
		}
	}
	if hubHTTPTool != "http_echo" || hubStdioTool != "stdio_echo" {
		t.Fatal("the tool names the run waits for are not the prefixed echo")
	}
}

// Bad arguments are refused before anything is started.
func TestRunRefusesBadArguments(t *testing.T) {
	before := len(childGroups(os.Getpid()))
	for _, args := range [][]string{
		{"--sessions", "0"},
		{"--sessions", "1,x"},
		{"--rounds", "0"},
		{"--duration", "soon"},
		{"--hub-env", "NOEQUALS"},
		{"--no-such-flag"},
		{"extra", "--sessions", "0"},
	} {
		if err := run(context.Background(), args); err == nil {
			t.Errorf("run(%q) was accepted", args)
		}
	}
	if after := len(childGroups(os.Getpid())); after != before {
		t.Fatalf("refused runs left %d processes", after-before)
	}
	for _, args := range [][]string{nil, {"--stdio", "--http", "127.0.0.1:0"}, {"--bogus"}, {"--stdio", "extra"}} {
		if err := echoServer(context.Background(), args); err == nil {
			t.Errorf("echo-server %q was accepted", args)
		}
	}
}

func TestPerCallAndRound(t *testing.T) {
	if got := perCall(1500*time.Microsecond, 3); got != "500" {
		t.Errorf("perCall = %s", got)
	}
	if got := perCall(time.Second, 0); got != "-" {
		t.Errorf("perCall with no calls = %s", got)
	}
	for in, want := range map[time.Duration]time.Duration{
		1234567 * time.Nanosecond: 1230 * time.Microsecond,
		1235001 * time.Nanosecond: 1240 * time.Microsecond,
		999400 * time.Nanosecond:  999 * time.Microsecond,
		1499 * time.Nanosecond:    time.Microsecond,
	} {
		if got := round(in); got != want {
			t.Errorf("round(%v) = %v, want %v", in, got, want)
		}
	}
}

// The table: one line per row, the hub paths' rate as a share of the
// direct path's at the same concurrency, "-" where there is nothing to
// divide by or no hub to account for.
func TestPrintTable(t *testing.T) {
	direct := target{path: "direct http", tool: "echo"}
	viaHub := target{path: "hub -> http", token: "x", tool: hubHTTPTool, cpu: cpuRoles{hub: 1, upstream: 2}}
	rows := []measurement{
		{target: direct, sessions: 1, calls: 1000, elapsed: time.Second, p50: 900 * time.Microsecond, p99: 4712345 * time.Nanosecond,
			cpu: cpuUse{client: 200 * time.Millisecond, upstream: 100 * time.Millisecond}},
		{target: viaHub, sessions: 1, calls: 600, elapsed: time.Second, failed: 2, p50: 1700 * time.Microsecond, p99: 4 * time.Millisecond,
			cpu: cpuUse{client: 120 * time.Millisecond, hub: 300 * time.Millisecond, upstream: 60 * time.Millisecond}},
		{target: viaHub, sessions: 8, calls: 100, elapsed: time.Second}, // no direct row at 8
	}
	var b strings.Builder
	printTable(&b, rows)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table:\n%s", b.String())
	}
	fields := func(i int) string { return strings.Join(strings.Fields(lines[i]), " ") }
	for i, want := range []string{
		"path sessions calls/s p50 p99 failed hub/direct CPU µs/call: client hub upstream",
		"direct http 1 1000 900µs 4.71ms 0 - 200 - 100",
		"hub -> http 1 600 1.7ms 4ms 2 0.60 200 500 100",
		"hub -> http 8 100 0s 0s 0 - 0 0 0",
	} {
		if got := fields(i); got != want {
			t.Errorf("line %d:\n got %s\nwant %s", i, got, want)
		}
	}
	b.Reset()
	printTable(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no rows printed %q", b.String())
	}
}

func TestProcCPU(t *testing.T) {
	if d, err := procCPU(os.Getpid()); err != nil || d < 0 {
		t.Fatalf("own CPU %v, %v", d, err)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Fatal("CPU of a process that does not exist")
	}
}

// One short real run: the hub binary, the echo server and the hub's stdio
// child (both this test binary in its echo-server role), every path
// measured at two concurrencies, every call answered, and nothing left
// running afterwards.
func TestRunMeasuresEveryPath(t *testing.T) {
	hubBin := filepath.Join(t.TempDir(), "crewlet")
	if out, err := exec.Command("go", "build", "-o", hubBin, "github.com/crewlet/hub/cmd/crewlet").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/crewlet: %v\n%s", err, out)
	}
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// run prints its progress and table on standard output.
	stdout := os.Stdout
	os.Stdout = out
	err = run(context.Background(), []string{"--hub-binary", hubBin, "--duration", "300ms", "--sessions", "1,4", "--max-calls", "200"})
	os.Stdout = stdout
	printed, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("run: %v\n%s", err, printed)
	}
	rowRe := regexp.MustCompile(`(?m)^\s*(direct http|hub -> http|hub -> stdio)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(\S+)`)
	rows := rowRe.FindAllStringSubmatch(string(printed), -1)
	if len(rows) != 6 {
		t.Fatalf("%d table rows, want 3 paths x 2 concurrencies:\n%s", len(rows), printed)
	}
	for _, r := range rows {
		if r[3] == "0" || r[4] != "0" || (r[1] == "direct http") != (r[5] == "-") {
			t.Errorf("row %q: calls/s %s, failed %s, hub/direct %s", r[1]+" x"+r[2], r[3], r[4], r[5])
		}
	}
	if kids := childGroups(os.Getpid()); len(kids) != 0 {
		t.Fatalf("the run left processes behind: %v", kids)
	}
}
