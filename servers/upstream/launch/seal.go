package launch

import "strings"

// SealCommand is the command that seals the variable name into a node's
// secret store. dataDir is the data directory a command must name to reach
// that store, "" for the default one: a person who pastes the command for
// a node started with --data-dir seals the value where that node reads it,
// not into a store of the same name in the current directory. Every
// sentence that tells a person to seal a value builds its command here.
func SealCommand(name, dataDir string) string {
	cmd := "crewlet secrets set " + name
	if dataDir != "" {
		cmd += " --data-dir " + shellWord(dataDir)
	}
	return cmd
}

// shellWord quotes a path for a shell when it needs it, so the command
// said can be pasted as it is.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
