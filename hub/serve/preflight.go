package serve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/upstream/launch"
)

// DefaultDataDir is where a node keeps its data unless told otherwise.
const DefaultDataDir = "./.crewlet"

// Start is what a node is started with besides its company: where its
// company file and data are, the TLS pair its command line names, and
// where its ${VAR}s resolve from (the secret store, then the environment).
type Start struct {
	ConfigFile, DataDir string
	TLS                 TLSFiles
	Env                 config.Lookup
}

// Problem is one thing a node started on a company would meet.
type Problem struct {
	Text string
	// Refuses: the node does not start with it. Otherwise it starts, and
	// the part that needs what is missing does not (a server reads
	// Failing, search ranks by keyword, a seat's turns fail), saying so
	// where it is seen.
	Refuses bool
}

// Preflight is every check a node makes of a company before it starts:
// `crewlet serve` refuses to start on a problem that Refuses, and
// `crewlet config check` reports every one and fails on it. One function,
// so the check cannot pass what the node then refuses, nor name it
// differently.
func Preflight(c *config.Company, s Start) []Problem {
	var out []Problem
	for _, u := range c.Unsets(s.Env) {
		out = append(out, Problem{Text: u.String() + ". " + StoreCommand(u.Variable, s.DataDir), Refuses: u.Refuses})
	}
	if files := tlsFiles(s.TLS, c, s.ConfigFile); files.set() {
		if _, err := loadKeyPair(files); err != nil {
			out = append(out, Problem{Text: err.Error(), Refuses: true})
		}
	}
	return out
}

// StoreCommand says how a person supplies a variable to a node with data
// directory dataDir: sealed into its secret store, or in its environment.
func StoreCommand(name, dataDir string) string {
	return fmt.Sprintf("Seal it with `%s` (the value on stdin), or set it in the hub's environment", launch.SealCommand(name, storeDir(dataDir)))
}

// storeDir is the data directory a command must name to reach the secret
// store of a node keeping its data in dataDir: none for the default one.
func storeDir(dataDir string) string {
	if dataDir == DefaultDataDir {
		return ""
	}
	return dataDir
}

// refusals is the problems a node does not start with, as one error.
func refusals(problems []Problem) error {
	var lines []string
	for _, p := range problems {
		if p.Refuses {
			lines = append(lines, p.Text)
		}
	}
	switch len(lines) {
	case 0:
		return nil
	case 1:
		return errors.New(lines[0])
	}
	return fmt.Errorf("%d problems:\n  - %s", len(lines), strings.Join(lines, "\n  - "))
}
