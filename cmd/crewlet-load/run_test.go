package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// The company the harness writes is one the hub accepts as it is: the
// echo's stateless and session paths and its stdio child behind distinct
// prefixes, and one admin token from tokenVar.
func TestCompanyIsAValidCompany(t *testing.T) {
	c, err := config.Parse([]byte(company("http://127.0.0.1:9", "/usr/local/bin/crewlet-load")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.MCPServers); n != 3 {
		t.Fatalf("%d servers", n)
	}
	tokens, err := c.OperatorTokens(func(k string) (string, bool) { return "the-token", k == tokenVar })
	if err != nil || len(tokens) != 1 || tokens[0].Secret != "the-token" || !tokens[0].Admin {
		t.Fatalf("operator tokens %+v, %v", tokens, err)
	}
	for _, want := range []string{"tool_prefix: http_", "tool_prefix: session_", "tool_prefix: stdio_", `url: "http://127.0.0.1:9/mcp"`,
		`url: "http://127.0.0.1:9/session/mcp"`, `command: "/usr/local/bin/crewlet-load"`, "args: [echo-server, --stdio]"} {
		if !strings.Contains(company("http://127.0.0.1:9", "/usr/local/bin/crewlet-load"), want) {
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
		{"--revisions", "2024-11-05"},
		{"--clients", "go-sdk,fast"},
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

// The table: one line per row, an echo row through the hub compared with
// the direct row of its revision, sessions and baseline (its rate as a
// share, what it added to p50), "-" where there is nothing to compare with
// or no hub or allocations to account for.
func TestPrintTable(t *testing.T) {
	direct := target{path: "direct http", rev: rev2025, tool: "echo", direct: true, baseline: "http", cpu: cpuRoles{upstream: 2}}
	viaHub := target{path: "hub -> http", rev: rev2025, token: "x", tool: hubHTTPTool, baseline: "http", cpu: cpuRoles{hub: 1, upstream: 2}}
	other := viaHub
	other.rev = rev2026 // no direct row on this revision
	lean := viaHub
	lean.client = clientLean
	read := target{path: "hub list_projects", rev: rev2025, token: "x", tool: "list_projects", baseline: "http", cpu: cpuRoles{hub: 1}}
	rows := []measurement{
		{target: direct, sessions: 1, calls: 1000, elapsed: time.Second, p50: 900 * time.Microsecond, p99: 4712345 * time.Nanosecond,
			cpu: cpuUse{client: 200 * time.Millisecond, upstream: 100 * time.Millisecond}},
		{target: viaHub, sessions: 1, calls: 600, elapsed: time.Second, failed: 2, p50: 1700 * time.Microsecond, p99: 4 * time.Millisecond,
			cpu:    cpuUse{client: 120 * time.Millisecond, hub: 300 * time.Millisecond, upstream: 60 * time.Millisecond},
			allocs: allocUse{objects: 60000, bytes: 600 * 2048, ok: true}},
		{target: viaHub, sessions: 8, calls: 100, elapsed: time.Second}, // no direct row at 8
		{target: other, sessions: 1, calls: 100, elapsed: time.Second},
		{target: read, sessions: 1, calls: 100, elapsed: time.Second, p50: time.Millisecond, cpu: cpuUse{hub: 10 * time.Millisecond}},
		{target: lean, sessions: 1, calls: 100, elapsed: time.Second}, // the direct row is another client's
	}
	var b strings.Builder
	printTable(&b, rows)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("table:\n%s", b.String())
	}
	fields := func(i int) string { return strings.Join(strings.Fields(lines[i]), " ") }
	for i, want := range []string{
		"path revision client sessions calls/s p50 p99 failed hub/direct +p50 CPU µs/call: client hub upstream hub allocs/call hub KiB/call",
		"direct http 2025-11-25 go-sdk 1 1000 900µs 4.71ms 0 - - 200 - 100 - -",
		"hub -> http 2025-11-25 go-sdk 1 600 1.7ms 4ms 2 0.60 800µs 200 500 100 100 2.0",
		"hub -> http 2025-11-25 go-sdk 8 100 0s 0s 0 - - 0 0 0 - -",
		"hub -> http 2026-07-28 go-sdk 1 100 0s 0s 0 - - 0 0 0 - -",
		"hub list_projects 2025-11-25 go-sdk 1 100 1ms 0s 0 - - 0 100 - - -",
		"hub -> http 2025-11-25 lean 1 100 0s 0s 0 - - 0 0 0 - -",
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

// One short real run: the hub binary, the echo server, the relay and the
// hub's stdio child (this test binary in its echo-server and relay roles), every section
// measured on both revisions at two concurrencies, every call answered,
// every echo row through the hub compared with its direct row, and nothing
// left running afterwards.
func TestRunMeasuresEveryPath(t *testing.T) {
	hubBin := hubBinary(t)
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// run prints its progress and table on standard output.
	stdout := os.Stdout
	os.Stdout = out
	err = run(context.Background(), []string{"--hub-binary", hubBin, "--duration", "300ms", "--sessions", "1,4", "--max-calls", "200",
		"--write-sessions", "4", "--list-sessions", "2", "--idle-sessions", "20", "--clients", "go-sdk,lean"})
	os.Stdout = stdout
	printed, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("run: %v\n%s", err, printed)
	}
	rowRe := regexp.MustCompile(`(?m)^\s*(direct http|hub -> http|relay -> http|sdk proxy -> http|hub -> stdio|direct session|hub -> session|hub \w+)\s+(\d{4}-\d\d-\d\d)\s+(go-sdk|lean)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(\S+)`)
	rows := rowRe.FindAllStringSubmatch(string(printed), -1)
	// Per client and concurrency: seven echo rows on 2025-11-25 and five
	// on 2026-07-28 (the relay's and the sdk proxy's among them), two
	// first-party reads on each; then a write and a list on each revision.
	if want := 2 * (2*(7+5+2+2) + 4); len(rows) != want {
		t.Fatalf("%d table rows, want %d:\n%s", len(rows), want, printed)
	}
	clients := map[string]int{}
	for _, r := range rows {
		clients[r[3]]++
		echo := strings.Contains(r[1], "->")
		if r[5] == "0" || r[6] != "0" || echo != (r[7] != "-") {
			t.Errorf("row %q: calls/s %s, failed %s, hub/direct %s", r[1]+" "+r[2]+" "+r[3]+" x"+r[4], r[5], r[6], r[7])
		}
	}
	if clients[clientSDK] != len(rows)/2 || clients[clientLean] != len(rows)/2 {
		t.Errorf("rows per client %v, want half each", clients)
	}
	// Twenty sessions are too few to weigh against the heap's noise: only
	// that the line is there is checked.
	if !regexp.MustCompile(`idle 2025-11-25 sessions with their event streams, 20 open: per session -?[\d.]+ KiB live`).Match(printed) {
		t.Errorf("no idle-session line:\n%s", printed)
	}
	if kids := childGroups(os.Getpid()); len(kids) != 0 {
		t.Fatalf("the run left processes behind: %v", kids)
	}
}

// The list rows' check, on the page as either client read it off the wire:
// a page shorter than asked for, a refusal and an answer with no structured
// content all fail the call, and the two readers agree on every answer.
func TestListedAtLeast(t *testing.T) {
	page := func(n int) string {
		items := strings.TrimSuffix(strings.Repeat(`{"key":"CORE-1"},`, n), ",")
		return `{"content":[{"type":"text","text":"page"}],"structuredContent":{"items":[` + items + `]}}`
	}
	for _, c := range []struct {
		wire string
		ok   bool
	}{
		{page(50), true},
		{page(51), true},
		{page(49), false},
		{page(0), false},
		{`{"content":[{"type":"text","text":"no such project"}],"isError":true}`, false},
		{`{"content":[{"type":"text","text":"page"}]}`, false},
		{`{"content":[],"structuredContent":{"items":null}}`, false},
		{`{"content":[],"structuredContent":{"items":{"key":"CORE-1"}}}`, false},
	} {
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(c.wire), &res); err != nil {
			t.Fatal(err)
		}
		if err := listedAtLeast(50)(answerOf(&res)); (err == nil) != c.ok {
			t.Errorf("go-sdk: %.60s...: %v, want ok=%v", c.wire, err, c.ok)
		}
		a, err := readReply("application/json", []byte(`{"jsonrpc":"2.0","id":7,"result":`+c.wire+`}`), "7")
		if err == nil {
			err = listedAtLeast(50)(a)
		}
		if (err == nil) != c.ok {
			t.Errorf("lean: %.60s...: %v, want ok=%v", c.wire, err, c.ok)
		}
	}
}

// A word that is not a flag is refused, naming the command and the word:
// flag parsing stops at it, and the flags after it would be dropped.
func TestCommandsTakeFlagsOnly(t *testing.T) {
	for name, cmd := range map[string]func(context.Context, []string) error{
		"run": run, "fleet": fleet, "echo-server": echoServer, "relay": relayServer,
		"soak": func(_ context.Context, args []string) error { _, err := parseSoak(args); return err },
	} {
		err := cmd(context.Background(), []string{"stray", "--duration", "1s"})
		if want := name + ` takes flags only; "stray" is not one`; err == nil || err.Error() != want {
			t.Errorf("%s stray: %v, want %q", name, err, want)
		}
	}
}
