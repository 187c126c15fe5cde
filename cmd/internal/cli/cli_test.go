package cli

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
)

// tree is a binary of two levels: a leaf with an argument and flags, one
// that fails as told, and a group.
func tree(got *[]string, dir *string, fail error) *Command {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	d := fs.String("data-dir", "./.x", "the data `DIR`")
	fs.Bool("debug", false, "log more")
	fs.String("node", "", "a `NAME`")
	return &Command{Name: "x", Version: "9.9.9", Subs: []*Command{
		{Name: "config", Summary: "config things", Subs: []*Command{{
			Name: "check", Args: []string{"FILE"}, Flags: fs, Summary: "check a file",
			Groups: []FlagGroup{{Title: "fleet flags", Names: []string{"node"}}},
			Run:    func(args []string) error { *got, *dir = args, *d; return fail },
		}}},
		{Name: "fail", Run: func([]string) error { return fail }},
	}}
}

func TestCommandLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		fail error
		code int
		// out and errOut are what stdout and stderr start with ("" for
		// nothing at all).
		out, errOut string
		got         []string
		dir         string
	}{
		{name: "root help", args: []string{"--help"}, out: "usage: x COMMAND"},
		{name: "root -h", args: []string{"-h"}, out: "usage: x COMMAND"},
		{name: "root help word", args: []string{"help"}, out: "usage: x COMMAND"},
		{name: "group help", args: []string{"config", "--help"}, out: "usage: x config COMMAND"},
		{name: "leaf help", args: []string{"config", "check", "--help"}, out: "usage: x config check [--data-dir DIR]"},
		{name: "leaf help after its argument", args: []string{"config", "check", "f.yaml", "-help"}, out: "usage: x config check "},
		{name: "nothing", args: nil, code: 2, errOut: "x: which command?\nusage: x COMMAND"},
		{name: "unknown command", args: []string{"nope"}, code: 2, errOut: "x: unknown command \"nope\"\nusage: x COMMAND"},
		{name: "unknown flag at the root", args: []string{"--bogus"}, code: 2, errOut: "x: unknown flag \"--bogus\"\nusage: x COMMAND"},
		{name: "unknown flag of a leaf", args: []string{"config", "check", "--bogus", "f"}, code: 2,
			errOut: "x config check: flag provided but not defined: -bogus\nusage: x config check "},
		{name: "a flag without its value", args: []string{"config", "check", "f", "--data-dir"}, code: 2,
			errOut: "x config check: flag needs an argument: -data-dir\nusage: x config check "},
		{name: "a mistyped command", args: []string{"confg"}, code: 2, errOut: "x: unknown command \"confg\"; did you mean config?\nusage: x COMMAND"},
		{name: "a mistyped subcommand", args: []string{"config", "chek", "f"}, code: 2,
			errOut: "x config: unknown command \"chek\"; did you mean check?\nusage: x config COMMAND"},
		{name: "a word near no command", args: []string{"deploy"}, code: 2, errOut: "x: unknown command \"deploy\"\nusage: x COMMAND"},
		{name: "the version", args: []string{"--version"}, out: "x 9.9.9\n"},
		{name: "the version, one dash", args: []string{"-version"}, out: "x 9.9.9\n"},
		{name: "missing argument", args: []string{"config", "check"}, code: 2, errOut: "x config check: FILE is missing\nusage: x config check "},
		{name: "one argument too many", args: []string{"config", "check", "a", "b"}, code: 2,
			errOut: "x config check: unexpected argument \"b\"\nusage: x config check "},
		{name: "flags before", args: []string{"config", "check", "--data-dir", "d", "f"}, got: []string{"f"}, dir: "d"},
		{name: "flags after", args: []string{"config", "check", "f", "--data-dir=d"}, got: []string{"f"}, dir: "d"},
		{name: "single dash", args: []string{"config", "check", "-data-dir", "d", "-debug", "f"}, got: []string{"f"}, dir: "d"},
		{name: "after -- a dash is an argument", args: []string{"config", "check", "--", "-f"}, got: []string{"-f"}, dir: "./.x"},
		{name: "the command's exit code", args: []string{"fail"}, fail: Exit(3), code: 3},
		{name: "a usage error of the command", args: []string{"config", "check", "f"}, fail: Usagef("--node needs --nats"), code: 2,
			errOut: "x config check: --node needs --nats\nusage: x config check ", got: []string{"f"}, dir: "./.x"},
		{name: "a failure", args: []string{"fail"}, fail: errors.New("it broke"), code: 1, errOut: "x: it broke\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var dir string
			var stdout, stderr bytes.Buffer
			code := Main(tree(&got, &dir, tc.fail), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, s := range []struct {
				name, got, want string
			}{{"stdout", stdout.String(), tc.out}, {"stderr", stderr.String(), tc.errOut}} {
				if s.want == "" && s.got != "" || !strings.HasPrefix(s.got, s.want) {
					t.Errorf("%s:\n%s\nwant it to start with:\n%s", s.name, s.got, s.want)
				}
			}
			if !slices.Equal(got, tc.got) || dir != tc.dir {
				t.Errorf("ran with %q, --data-dir %q; want %q, %q", got, dir, tc.got, tc.dir)
			}
		})
	}
}

// A group's usage lists every command under it with all its flags, a
// group's flags after the rest; a leaf's lists each flag with its value's
// name, what it does and its default, the group under its heading.
func TestUsage(t *testing.T) {
	var got []string
	var dir string
	var stdout bytes.Buffer
	Main(tree(&got, &dir, nil), []string{"--help"}, &stdout, &bytes.Buffer{})
	for _, want := range []string{
		"  x config check [--data-dir DIR] [--debug] [--node NAME] FILE\n      check a file\n",
		"  x fail\n",
		`Run "x COMMAND --help" for a command's flags.`,
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("root usage lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	Main(tree(&got, &dir, nil), []string{"config", "check", "-h"}, &stdout, &bytes.Buffer{})
	want := "usage: x config check [--data-dir DIR] [--debug] [--node NAME] FILE\n\ncheck a file\n\n" +
		"flags:\n  --data-dir DIR\n        the data DIR (default ./.x)\n  --debug\n        log more\n\n" +
		"fleet flags:\n  --node NAME\n        a NAME\n"
	if stdout.String() != want {
		t.Errorf("leaf usage:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

func TestWrap(t *testing.T) {
	words := []string{"usage: x"}
	for range 30 {
		words = append(words, "[--flag VALUE]")
	}
	for i, line := range strings.Split(strings.TrimSuffix(wrap("", "    ", words), "\n"), "\n") {
		if len(line) > width || i > 0 && !strings.HasPrefix(line, "    [--flag") {
			t.Errorf("line %d: %q", i, line)
		}
	}
}

func TestLeavesAndGroups(t *testing.T) {
	var got []string
	var dir string
	root := tree(&got, &dir, nil)
	if l := Leaves(root); len(l) != 2 || !slices.Equal(l[0], []string{"config", "check"}) || !slices.Equal(l[1], []string{"fail"}) {
		t.Errorf("leaves: %q", l)
	}
	if g := Groups(root); len(g) != 2 || len(g[0]) != 0 || !slices.Equal(g[1], []string{"config"}) {
		t.Errorf("groups: %q", g)
	}
}
