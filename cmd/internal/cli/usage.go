package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// width is where a synopsis is wrapped.
const width = 100

// writeUsage writes the usage of the last command of path: a leaf's
// synopsis and every flag with what it does and its default; a group's
// commands, each with its whole synopsis.
func writeUsage(w io.Writer, path []*Command) {
	c := path[len(path)-1]
	name := pathName(path)
	var b strings.Builder
	if len(c.Subs) > 0 {
		fmt.Fprintf(&b, "usage: %s COMMAND ...\n", name)
		if c.Summary != "" {
			fmt.Fprintf(&b, "\n%s\n", c.Summary)
		}
		if c.About != "" {
			fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(c.About, "\n"))
		}
		b.WriteString("\ncommands:\n")
		for _, leaf := range Leaves(c) {
			sub := Find(c, leaf)
			b.WriteString(wrap("  ", "        ", append([]string{name + " " + strings.Join(leaf, " ")}, synopsis(sub)...)))
			if sub.Summary != "" {
				fmt.Fprintf(&b, "      %s\n", sub.Summary)
			}
		}
		fmt.Fprintf(&b, "\nRun \"%s COMMAND --help\" for a command's flags.\n", name)
		io.WriteString(w, b.String())
		return
	}
	b.WriteString(wrap("", "        ", append([]string{"usage: " + name}, synopsis(c)...)))
	if c.Summary != "" {
		fmt.Fprintf(&b, "\n%s\n", c.Summary)
	}
	if c.About != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(c.About, "\n"))
	}
	plain, groups := c.flagGroups()
	if len(plain) > 0 {
		b.WriteString("\nflags:\n")
		writeFlags(&b, plain)
	}
	for i, g := range c.Groups {
		if len(groups[i]) > 0 {
			fmt.Fprintf(&b, "\n%s:\n", g.Title)
			writeFlags(&b, groups[i])
		}
	}
	io.WriteString(w, b.String())
}

// Find is the command at path under root, or nil.
func Find(root *Command, path []string) *Command {
	c := root
	for _, name := range path {
		if c = c.sub(name); c == nil {
			return nil
		}
	}
	return c
}

// flagGroups splits a leaf's flags: those in no group, sorted by name,
// then each group's in the order it lists them.
func (c *Command) flagGroups() (plain []*flag.Flag, groups [][]*flag.Flag) {
	if c.Flags == nil {
		return nil, make([][]*flag.Flag, len(c.Groups))
	}
	grouped := map[string]bool{}
	for _, g := range c.Groups {
		var fs []*flag.Flag
		for _, n := range g.Names {
			if f := c.Flags.Lookup(n); f != nil {
				fs = append(fs, f)
				grouped[n] = true
			}
		}
		groups = append(groups, fs)
	}
	c.Flags.VisitAll(func(f *flag.Flag) {
		if !grouped[f.Name] {
			plain = append(plain, f)
		}
	})
	return plain, groups
}

// synopsis is a leaf's flags, then its arguments, as its usage line
// shows them.
func synopsis(c *Command) []string {
	var out []string
	plain, groups := c.flagGroups()
	for _, f := range slices.Concat(append([][]*flag.Flag{plain}, groups...)...) {
		if v := valueName(f); v != "" {
			out = append(out, "[--"+f.Name+" "+v+"]")
		} else {
			out = append(out, "[--"+f.Name+"]")
		}
	}
	return append(out, c.Args...)
}

// valueName is what a flag's value is called: the back-quoted word of its
// usage, else a name for its type; "" for a switch.
func valueName(f *flag.Flag) string {
	name, _ := flag.UnquoteUsage(f)
	switch name {
	case "":
		return ""
	case "string", "value":
		return "VALUE"
	case "int", "uint", "int64", "uint64":
		return "N"
	case "duration":
		return "DURATION"
	case "float":
		return "NUMBER"
	}
	return name
}

func writeFlags(b *strings.Builder, fs []*flag.Flag) {
	for _, f := range fs {
		_, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if v := valueName(f); v != "" {
			head += " " + v
		}
		fmt.Fprintf(b, "%s\n        %s", head, strings.ReplaceAll(usage, "\n", "\n        "))
		switch f.DefValue {
		case "", "false", "0", "0s":
		default:
			fmt.Fprintf(b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	}
}

// wrap joins words into lines of at most width columns, the first line
// after first, the rest after indent.
func wrap(first, indent string, words []string) string {
	var b strings.Builder
	line := first
	fresh := true
	for _, w := range words {
		if !fresh && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, fresh = indent, true
		}
		if !fresh {
			line += " "
		}
		line += w
		fresh = false
	}
	b.WriteString(line + "\n")
	return b.String()
}
