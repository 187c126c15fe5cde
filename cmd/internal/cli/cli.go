// Package cli is how this repository's commands read their command lines,
// written once so every command and subcommand behaves alike: --help (or
// -h) prints that command's own usage on stdout and exits 0; a flag the
// command does not know, an argument missing or one too many prints what
// was wrong and the usage on stderr and exits 2; a command that fails
// exits 1 (or the code it chose). A group's usage lists every command
// under it with all its flags, so the top level shows everything a binary
// can do.
//
// It is a thin layer over the standard flag package rather than a CLI
// framework: the flags scripts already pass keep their exact names and
// spelling (-debug and --debug alike, --flag=value and --flag value),
// which a GNU-style parser would change.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/crewlet/hub/servers/editdistance"
)

// Command is one command: a group of subcommands (Subs), or a leaf that
// runs (Run) with its flags and positional arguments.
type Command struct {
	// Name is the word that selects the command; the root's is the
	// binary's name.
	Name string
	// Summary is one line saying what it does, shown under its synopsis.
	Summary string
	// About, when set, is printed in the command's own usage after the
	// synopsis.
	About string
	// Args names a leaf's positional arguments (FILE, NAME), each
	// required, in order; flags may come before, between or after them.
	Args []string
	// Flags are a leaf's flags; nil for none. Their usage text may name
	// the value in back quotes (`FILE`), as the flag package reads it.
	Flags *flag.FlagSet
	// Groups list some flags under a heading of their own, after the rest.
	Groups []FlagGroup
	// Run runs a leaf with its positional arguments, the flags parsed.
	Run func(args []string) error
	// Subs are a group's commands.
	Subs []*Command
	// Version, on the root, is what --version (or -version) prints, after
	// the binary's name.
	Version string
}

// FlagGroup is a set of a command's flags shown under their own heading.
type FlagGroup struct {
	Title string
	Names []string
}

// Exit ends the command with this code and nothing more said: the command
// has said what there was to say.
type Exit int

func (e Exit) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// UsageError is a command line the flags alone could not refuse (a flag
// that needs another): said with the usage on stderr, exit 2.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef makes a UsageError.
func Usagef(format string, args ...any) error { return UsageError{Msg: fmt.Sprintf(format, args...)} }

// Main runs the command line args (without the binary's name) against
// root and returns the process's exit code.
func Main(root *Command, args []string, stdout, stderr io.Writer) int {
	path := []*Command{root}
	cur := root
	for len(cur.Subs) > 0 {
		if len(args) == 0 {
			fmt.Fprintf(stderr, "%s: which command?\n", pathName(path))
			writeUsage(stderr, path)
			return 2
		}
		a := args[0]
		if isHelp(a) {
			writeUsage(stdout, path)
			return 0
		}
		if cur == root && root.Version != "" && (a == "--version" || a == "-version") {
			fmt.Fprintf(stdout, "%s %s\n", root.Name, root.Version)
			return 0
		}
		sub := cur.sub(a)
		if sub == nil {
			what := "command"
			if strings.HasPrefix(a, "-") {
				what = "flag"
			}
			fmt.Fprintf(stderr, "%s: unknown %s %q", pathName(path), what, a)
			if meant := cur.nearest(a); what == "command" && meant != "" {
				fmt.Fprintf(stderr, "; did you mean %s?", meant)
			}
			fmt.Fprintln(stderr)
			writeUsage(stderr, path)
			return 2
		}
		path, cur, args = append(path, sub), sub, args[1:]
	}

	fs := cur.Flags
	if fs == nil {
		fs = flag.NewFlagSet(cur.Name, flag.ContinueOnError)
	}
	// The flag package says what was wrong on the set's output and then
	// calls Usage; both are written here instead, what was wrong after the
	// command's name as every other refusal is, and the usage to the
	// stream the outcome calls for.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	pos, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		writeUsage(stdout, path)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", pathName(path), err)
		writeUsage(stderr, path)
		return 2
	case len(pos) < len(cur.Args):
		fmt.Fprintf(stderr, "%s: %s is missing\n", pathName(path), strings.Join(cur.Args[len(pos):], " "))
		writeUsage(stderr, path)
		return 2
	case len(pos) > len(cur.Args):
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", pathName(path), pos[len(cur.Args)])
		writeUsage(stderr, path)
		return 2
	}
	err = cur.Run(pos)
	var exit Exit
	var usage UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return int(exit)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %s\n", pathName(path), usage.Msg)
		writeUsage(stderr, path)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", root.Name, err)
		return 1
	}
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

// nearest is the name of the subcommand a mistyped word most likely
// meant: the closest within two edits (serv, sevre), "" for none.
func (c *Command) nearest(word string) string {
	best, bestD := "", 3
	for _, s := range c.Subs {
		if d := editdistance.Between(word, s.Name); d < bestD {
			best, bestD = s.Name, d
		}
	}
	return best
}

func (c *Command) sub(name string) *Command {
	for _, s := range c.Subs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// parse reads flags wherever they stand among the positional arguments
// (`config check FILE --data-dir DIR` and `config check --data-dir DIR
// FILE` alike); after "--" everything is positional.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

func pathName(path []*Command) string {
	names := make([]string, len(path))
	for i, c := range path {
		names[i] = c.Name
	}
	return strings.Join(names, " ")
}

// Leaves lists every command that runs under root, each as its path of
// words from the root's first subcommand: what a test walks to hold every
// command to the same behaviour.
func Leaves(root *Command) [][]string {
	var out [][]string
	var walk func(prefix []string, c *Command)
	walk = func(prefix []string, c *Command) {
		if len(c.Subs) == 0 {
			out = append(out, prefix)
			return
		}
		for _, s := range c.Subs {
			walk(append(slices.Clone(prefix), s.Name), s)
		}
	}
	walk(nil, root)
	return out
}

// Groups lists every group under root, the root first, each as its path.
func Groups(root *Command) [][]string {
	var out [][]string
	var walk func(prefix []string, c *Command)
	walk = func(prefix []string, c *Command) {
		if len(c.Subs) == 0 {
			return
		}
		out = append(out, prefix)
		for _, s := range c.Subs {
			walk(append(slices.Clone(prefix), s.Name), s)
		}
	}
	walk(nil, root)
	return out
}
