package main

import (
	"strings"
	"testing"
)

// Issue 29, "the CLI's help is inconsistent", case by case as a new user
// met it: each asking for help got an error, another command's usage or an
// exit code a script reads as failure. Asking for help is not a failure:
// the command's own usage on stdout, exit 0.
func TestHelpIsTheCommandsOwnUsageOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, // exited 2
		{"-h"},
		{"serve", "--help"},         // flags, then exit 1 "flag: help requested"
		{"tracker-mcp", "--help"},   // the same
		{"config", "check", "-h"},   // "open --help: no such file or directory"
		{"config", "default", "-h"}, // the top-level usage
		{"secrets", "--help"},       // "needs a NAME"
		{"secrets", "set", "--help"},
		{"config", "import", "--help"},
	} {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			r := runCrewlet(t, "", nil, args...)
			cmd := "crewlet"
			if args[0] != "--help" && args[0] != "-h" {
				cmd += " " + strings.Join(args[:len(args)-1], " ")
			}
			if r.code != 0 || !isUsageOf(r.stdout, cmd) || r.stderr != "" {
				t.Fatalf("crewlet %s: want exit 0 and the usage of %q on stdout, nothing on stderr; got %s", name, cmd, r)
			}
		})
	}
}

// The top-level usage names the fleet's flags: a person reading it learns
// that a node can join a fleet, and with which flag.
func TestTopLevelUsageListsTheFleetFlags(t *testing.T) {
	r := runCrewlet(t, "", nil, "--help")
	for _, f := range []string{"--node", "--cluster-listen", "--cluster-peers", "--cluster-advertise", "--nats", "--nats-creds",
		"--replicas", "--lease-ttl", "--heartbeat"} {
		if !strings.Contains(r.stdout, f+" ") {
			t.Errorf("crewlet --help does not list %s:\n%s", f, r.stdout)
		}
	}
}

// A flag the command does not know, or an argument it needs and did not
// get, is a usage error: exit 2, the command's usage on stderr, stdout
// left alone (it may be a pipe into something).
func TestUsageErrorsExit2WithTheUsageOnStderr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cmd  string
	}{
		{[]string{"--bogus"}, "crewlet"},
		{[]string{"serve", "--bogus"}, "crewlet serve"},
		{[]string{"tracker-mcp", "--bogus"}, "crewlet tracker-mcp"},
		{[]string{"config", "check", "--bogus", "company.yaml"}, "crewlet config check"},
		{[]string{"config", "default", "--bogus"}, "crewlet config default"},
		{[]string{"secrets", "list", "--bogus"}, "crewlet secrets list"},
		{[]string{"config", "check"}, "crewlet config check"},
		{[]string{"secrets", "set"}, "crewlet secrets set"},
		{[]string{"secrets"}, "crewlet secrets"},
		{[]string{"config", "import"}, "crewlet config import"},
		{[]string{"serve", "--node", "a"}, "crewlet serve"}, // a fleet flag without a way of joining
	} {
		name := strings.Join(tc.args, " ")
		t.Run(name, func(t *testing.T) {
			r := runCrewlet(t, "", nil, tc.args...)
			if r.code != 2 || !hasUsageOf(r.stderr, tc.cmd) || r.stdout != "" {
				t.Fatalf("crewlet %s: want exit 2 and the usage of %q on stderr only; got %s", name, tc.cmd, r)
			}
		})
	}
}
