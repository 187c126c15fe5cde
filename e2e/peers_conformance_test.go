package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The MCP conformance suite (@modelcontextprotocol/conformance), a peer the
// e2e tests drive (see peers_test.go): its runs and the checks it reports.

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, ...
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Details      json.RawMessage `json:"details,omitempty"`
}

// conformanceReport is the per-scenario outcome of runConformance. A scenario
// passes when none of its checks has status FAILURE (warnings do not fail it,
// as in the suite's own verdict).
type conformanceReport struct {
	Passed   map[string][]string // scenario -> IDs of its successful checks
	Failed   map[string][]string // scenario -> "check-id: message" per failed check
	Warnings map[string][]string // scenario -> "check-id: message" per warning
	Checks   map[string][]conformanceCheck
	LogDir   string // raw suite output and checks.json files (under t.TempDir())
}

// requirePassed fails the test unless every named scenario ran and passed.
func (r conformanceReport) requirePassed(t testing.TB, scenarios ...string) {
	t.Helper()
	for _, s := range scenarios {
		if fails, ok := r.Failed[s]; ok {
			t.Errorf("conformance scenario %s did not pass: %s", s, strings.Join(fails, "; "))
		} else if _, ok := r.Passed[s]; !ok {
			t.Errorf("conformance scenario %s has no result", s)
		}
	}
}

var conformanceScenarios struct {
	once  sync.Once
	names []string
	err   error
}

// knownConformanceScenarios lists the suite's server scenarios (`list
// --server`), so a misspelt scenario fails loudly instead of surfacing as a
// server failure.
func knownConformanceScenarios(t testing.TB) []string {
	t.Helper()
	node, script := pinnedNode(t), conformanceScript(t)
	conformanceScenarios.once.Do(func() {
		var out bytes.Buffer
		cmd, ctx, cancel := boundedCommand(context.Background(), 30*time.Second, node, script, "list", "--server")
		defer cancel()
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		cmd.Stdout = &out
		cmd.Stderr = &out
		if timedOut, err := runBounded(cmd, ctx); timedOut || err != nil {
			conformanceScenarios.err = fmt.Errorf("conformance list --server (timed out: %v): %v\n%s", timedOut, err, out.String())
			return
		}
		// Lines look like "  - tools-list [2025-06-18,2025-11-25]".
		re := regexp.MustCompile(`^\s*-\s+(\S+)`)
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				conformanceScenarios.names = append(conformanceScenarios.names, m[1])
			}
		}
		if len(conformanceScenarios.names) == 0 {
			conformanceScenarios.err = fmt.Errorf("conformance list --server printed no scenarios:\n%s", out.String())
		}
	})
	if conformanceScenarios.err != nil {
		t.Fatalf("e2e: %v", conformanceScenarios.err)
	}
	return conformanceScenarios.names
}

func conformanceScript(t testing.TB) string {
	t.Helper()
	return filepath.Join(npmInstalled(t), "@modelcontextprotocol", "conformance", "dist", "index.js")
}

// resultDirRE matches the per-scenario directories the suite writes under -o:
// "server-<scenario>-<ISO time with : and . replaced by ->".
var resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runConformance runs the MCP conformance suite's server scenarios against the
// MCP endpoint at url and returns per-scenario results. With no scenarios it
// runs the suite's default "active" set in one process; otherwise one process
// per scenario, because the CLI takes a single --scenario (a repeated flag
// silently keeps only the last).
//
// Results come from the checks.json files the suite writes with -o, not from
// its console output. The console output goes to a file: its closing
// "Total: N passed, M failed" line must not reach go test's output, where CI
// would read it as the test runner's own tally. Only a reworded summary is
// logged.
func runConformance(t testing.TB, url string, scenarios ...string) conformanceReport {
	t.Helper()
	node, script := pinnedNode(t), conformanceScript(t)
	known := knownConformanceScenarios(t)
	for _, s := range scenarios {
		if !slices.Contains(known, s) {
			t.Fatalf("e2e: unknown conformance scenario %q; the pinned suite has: %s", s, strings.Join(known, ", "))
		}
	}
	logDir := filepath.Join(t.TempDir(), "conformance")
	rep := conformanceReport{
		Passed:   map[string][]string{},
		Failed:   map[string][]string{},
		Warnings: map[string][]string{},
		Checks:   map[string][]conformanceCheck{},
		LogDir:   logDir,
	}

	type run struct {
		args    []string
		timeout time.Duration
		expect  []string // scenarios this run should produce; nil = read them from its log
	}
	var runs []run
	if len(scenarios) == 0 {
		runs = append(runs, run{timeout: conformanceSuiteTimeout})
	}
	for _, s := range scenarios {
		runs = append(runs, run{args: []string{"--scenario", s}, timeout: conformanceRunTimeout, expect: []string{s}})
	}

	for i, r := range runs {
		outDir := filepath.Join(logDir, fmt.Sprintf("run-%02d", i))
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			t.Fatalf("e2e: %v", err)
		}
		logPath := filepath.Join(outDir, "console.log")
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatalf("e2e: %v", err)
		}
		args := append([]string{script, "server", "--url", url, "-o", outDir}, r.args...)
		cmd, ctx, cancel := boundedCommand(t.Context(), r.timeout, node, args...)
		cmd.Env = nodeEnv(t)
		cmd.Stdout = logf
		cmd.Stderr = logf
		timedOut, runErr := runBounded(cmd, ctx)
		cancel()
		logf.Close()
		code := exitCode(runErr)
		// 0 = all passed, 1 = something failed; anything else is the harness
		// itself breaking.
		if timedOut || (code != 0 && code != 1) {
			t.Fatalf("e2e: conformance run %v against %s ended abnormally (timed out: %v, exit %d); log:\n%s",
				r.args, url, timedOut, code, tailFile(logPath, 40))
		}
		expect := r.expect
		if expect == nil {
			expect = scenariosStarted(t, logPath)
		}
		got := readCheckFiles(t, outDir)
		for _, s := range expect {
			checks, ok := got[s]
			if !ok {
				// The suite writes checks.json only when a scenario ran to
				// the end; a scenario that threw leaves just the log.
				rep.Failed[s] = []string{fmt.Sprintf("no results written (exit %d); see %s", code, logPath)}
				continue
			}
			rep.add(s, checks)
		}
		for s := range got {
			if !slices.Contains(expect, s) {
				t.Fatalf("e2e: conformance wrote results for %s, which this run was not expected to run (log %s)", s, logPath)
			}
		}
	}

	ok := make([]string, 0, len(rep.Passed))
	for s := range rep.Passed {
		ok = append(ok, s)
	}
	bad := make([]string, 0, len(rep.Failed))
	for s := range rep.Failed {
		bad = append(bad, s)
	}
	sort.Strings(ok)
	sort.Strings(bad)
	t.Logf("conformance vs %s: scenarios ok=%d not-ok=%d %v", url, len(ok), len(bad), bad)
	return rep
}

func (r *conformanceReport) add(scenario string, checks []conformanceCheck) {
	r.Checks[scenario] = checks
	var passed, failed, warned []string
	for _, c := range checks {
		msg := c.ID + ": " + c.ErrorMessage
		if c.ErrorMessage == "" {
			msg = c.ID + ": " + c.Description
		}
		switch c.Status {
		case "SUCCESS":
			passed = append(passed, c.ID)
		case "FAILURE":
			failed = append(failed, msg)
		case "WARNING":
			warned = append(warned, msg)
		}
	}
	if len(warned) > 0 {
		r.Warnings[scenario] = warned
	}
	if len(failed) > 0 {
		r.Failed[scenario] = failed
		return
	}
	if passed == nil {
		passed = []string{} // present in the map even with only warnings/info
	}
	r.Passed[scenario] = passed
}

// scenariosStarted reads which scenarios a suite run attempted from its
// "=== Running scenario: NAME ===" lines.
func scenariosStarted(t testing.TB, logPath string) []string {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	defer f.Close()
	re := regexp.MustCompile(`^=== Running scenario: (\S+) ===$`)
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := re.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatalf("e2e: conformance suite run started no scenarios; log:\n%s", tailFile(logPath, 40))
	}
	return names
}

// readCheckFiles parses every <outDir>/server-<scenario>-<time>/checks.json.
func readCheckFiles(t testing.TB, outDir string) map[string][]conformanceCheck {
	t.Helper()
	entries, err := os.ReadDir(outDir)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	got := map[string][]conformanceCheck{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m := resultDirRE.FindStringSubmatch(e.Name())
		if m == nil {
			t.Fatalf("e2e: unexpected conformance output directory %s in %s", e.Name(), outDir)
		}
		raw, err := os.ReadFile(filepath.Join(outDir, e.Name(), "checks.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue // directory made, scenario threw before writing results
		}
		if err != nil {
			t.Fatalf("e2e: %v", err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("e2e: parsing %s/checks.json: %v", e.Name(), err)
		}
		got[m[1]] = checks
	}
	return got
}
