package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// GODEBUG gains the trace that keeps sysmon awake, beside what it held,
// unless the operator set schedtrace: then the environment is theirs.
func TestSysmonAwake(t *testing.T) {
	trace := "GODEBUG=" + sysmonTrace
	for _, c := range []struct {
		name    string
		env     []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"PATH=/bin"}, []string{"PATH=/bin", trace}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "PATH=/bin"}, []string{trace, "PATH=/bin"}, true},
		{"other settings kept", []string{"GODEBUG=gctrace=1,madvdontneed=0"},
			[]string{"GODEBUG=gctrace=1,madvdontneed=0," + sysmonTrace}, true},
		{"operator turned the trace off", []string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{"operator's own period", []string{"GODEBUG=gctrace=1,schedtrace=1000"}, []string{"GODEBUG=gctrace=1,schedtrace=1000"}, false},
		{"a name that only ends like it", []string{"GODEBUG=noschedtrace=1"}, []string{"GODEBUG=noschedtrace=1," + sysmonTrace}, true},
		{"only the first GODEBUG counts", []string{"GODEBUG=x=1", "GODEBUG=schedtrace=0"},
			[]string{"GODEBUG=x=1," + sysmonTrace, "GODEBUG=schedtrace=0"}, true},
		{"a look-alike variable", []string{"XGODEBUG=schedtrace=0"}, []string{"XGODEBUG=schedtrace=0", trace}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.env)
			got, changed := sysmonAwake(in)
			if changed != c.changed || !slices.Equal(got, c.want) {
				t.Errorf("sysmonAwake(%q) = %q, %v; want %q, %v", c.env, got, changed, c.want, c.changed)
			}
			if !slices.Equal(in, c.env) {
				t.Errorf("the environment handed in was changed: %q", in)
			}
		})
	}
	// The runtime reads the period as a 32-bit count of milliseconds: the
	// longest it takes is the one asked for.
	n, err := strconv.ParseInt(strings.TrimPrefix(sysmonTrace, "schedtrace="), 10, 32)
	if err != nil || n != math.MaxInt32 {
		t.Errorf("%s: %d, %v; want the longest period, %d", sysmonTrace, n, err, math.MaxInt32)
	}
}
