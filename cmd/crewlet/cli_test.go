package main

import (
	"flag"
	"strings"
	"testing"

	"github.com/crewlet/hub/cmd/internal/cli"
)

// Every command of the binary, groups and leaves alike, read from the one
// list the binary dispatches from (so a command added later is held to
// the same rules without a row written for it), run as the built binary:
// --help and -h print that command's usage on stdout and exit 0; an
// unknown flag exits 2 with that usage on stderr; a leaf run without its
// arguments exits 2 the same way.
func TestEveryCommandAnswersHelpAndRefusesAnUnknownFlag(t *testing.T) {
	root := commands()
	var paths [][]string
	paths = append(paths, cli.Groups(root)...)
	paths = append(paths, cli.Leaves(root)...)
	for _, path := range paths {
		name := strings.TrimSpace("crewlet " + strings.Join(path, " "))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, help := range []string{"--help", "-h"} {
				r := runCrewlet(t, "", nil, append(path, help)...)
				if r.code != 0 || !isUsageOf(r.stdout, name) || r.stderr != "" {
					t.Errorf("%s %s: want exit 0, its usage on stdout and nothing on stderr; got %s", name, help, r)
				}
			}
			r := runCrewlet(t, "", nil, append(path, "--no-such-flag")...)
			if r.code != 2 || !hasUsageOf(r.stderr, name) || r.stdout != "" {
				t.Errorf("%s --no-such-flag: want exit 2 and its usage on stderr only; got %s", name, r)
			}
			if c := cli.Find(root, path); len(c.Args) > 0 {
				r := runCrewlet(t, "", nil, path...)
				if r.code != 2 || !strings.Contains(r.stderr, strings.Join(c.Args, " ")+" is missing") ||
					!hasUsageOf(r.stderr, name) {
					t.Errorf("%s without %s: want exit 2 naming it, with the usage, on stderr; got %s", name, strings.Join(c.Args, " "), r)
				}
			}
		})
	}
}

// The top-level usage is the whole binary: every command, and every flag
// of each (the fleet's among serve's).
func TestTopLevelUsageListsEveryCommandAndFlag(t *testing.T) {
	root := commands()
	r := runCrewlet(t, "", nil, "--help")
	for _, path := range cli.Leaves(root) {
		c := cli.Find(root, path)
		line := "crewlet " + strings.Join(path, " ")
		// The command's entry: its synopsis, wrapped, and its summary,
		// up to the next command's.
		_, entry, ok := strings.Cut(r.stdout, "\n  "+line+" ")
		if !ok {
			_, entry, ok = strings.Cut(r.stdout, "\n  "+line+"\n")
		}
		if !ok {
			t.Errorf("crewlet --help does not list %s:\n%s", line, r.stdout)
			continue
		}
		entry, _, _ = strings.Cut(entry, "\n  crewlet ")
		if c.Flags == nil {
			continue
		}
		c.Flags.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(entry, "[--"+f.Name+"]") && !strings.Contains(entry, "[--"+f.Name+" ") {
				t.Errorf("crewlet --help does not list --%s under %s:\n%s", f.Name, line, entry)
			}
		})
	}
}
