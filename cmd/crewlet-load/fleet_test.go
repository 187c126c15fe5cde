package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestParseLayouts(t *testing.T) {
	got, err := parseLayouts("1, 3x3,3x1,5x3")
	if err != nil {
		t.Fatal(err)
	}
	want := []layout{{1, 1}, {3, 3}, {3, 1}, {5, 3}}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	// Two nodes, two copies, more copies than nodes, and words are
	// refused, each saying what a layout is.
	for _, bad := range []string{"2x1", "3x2", "3x4", "3", "x3", "three", "10x3", ""} {
		if _, err := parseLayouts(bad); err == nil || !strings.Contains(err.Error(), "NxR") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// One short real run of the fleet command: one node, then three keeping
// three copies, each behind HAProxy; both rows of each measured with every call
// answered, the CPU of every node reported, and nothing left running.
func TestFleetMeasuresEachLayout(t *testing.T) {
	hubBin := hubBinary(t)
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	stdout := os.Stdout
	os.Stdout = out
	err = fleet(context.Background(), []string{"--hub-binary", hubBin, "--layouts", "1,3x3", "--duration", "300ms",
		"--sessions", "4", "--write-sessions", "4", "--max-calls", "200"})
	os.Stdout = stdout
	printed, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("fleet: %v\n%s", err, printed)
	}
	rowRe := regexp.MustCompile(`(?m)^\s*(1 node|3 nodes, --replicas 3)\s+(forwarded echo|create_work_item)\s+4\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+\d+\s+(\d+)\s+(\d+(?: / \d+)*)\s+(\d+)\s`)
	rows := rowRe.FindAllStringSubmatch(string(printed), -1)
	if len(rows) != 4 {
		t.Fatalf("%d table rows, want 4:\n%s", len(rows), printed)
	}
	for _, r := range rows {
		nodes := len(strings.Split(r[6], " / "))
		if r[3] == "0" || r[4] != "0" || r[5] == "0" || (r[1] == "1 node") != (nodes == 1) || (r[1] != "1 node") != (nodes == 3) {
			t.Errorf("row %q: calls/s %s, failed %s, CPU of all nodes %s, of each %q", r[1]+" "+r[2], r[3], r[4], r[5], r[6])
		}
	}
	if kids := childGroups(os.Getpid()); len(kids) != 0 {
		t.Fatalf("the run left processes behind: %v", kids)
	}
}
