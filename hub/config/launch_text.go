package config

import (
	"fmt"
	"unicode/utf8"
)

// checkLaunchText refuses control characters in what a stdio server is
// started with. A NUL can never reach the system (exec refuses it, so the
// server would fail every start and be retried for ever), and an escape or
// other control character in a command is never meant: it would only
// repaint the terminal of whoever reads the launch. An argument may hold a
// tab, a newline or a carriage return, since `sh -c` scripts are written
// with them; a command may not.
func checkLaunchText(p string, s MCPServer, add func(string, ...any)) {
	if r, at, ok := firstControl(s.Command, false); ok {
		add("%s.command: holds the control character %s at byte %d; write the command without it", p, runeName(r), at)
	}
	for i, a := range s.Args {
		if r, at, ok := firstControl(a, true); ok {
			add("%s.args[%d]: holds the control character %s at byte %d; only tab, newline and carriage return may appear in an argument", p, i, runeName(r), at)
		}
	}
	for _, k := range keys(s.Env) {
		if r, at, ok := firstControl(s.Env[k], true); ok && r == 0 {
			add("%s.env.%s: holds the control character %s at byte %d; an environment value cannot carry a NUL", p, k, runeName(r), at)
		}
	}
}

// firstControl finds the first C0 control, DEL or C1 control in s; with
// layout, tab, newline and carriage return are allowed.
func firstControl(s string, layout bool) (rune, int, bool) {
	for i, r := range s {
		if r == utf8.RuneError {
			continue
		}
		if layout && (r == '\t' || r == '\n' || r == '\r') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return r, i, true
		}
	}
	return 0, 0, false
}

func runeName(r rune) string { return fmt.Sprintf("U+%04X", r) }
