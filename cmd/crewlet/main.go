// Command crewlet runs the Crewlet hub and its tools. `crewlet --help`
// lists every command with all its flags; `crewlet COMMAND --help` says
// what each flag does.
//
//	crewlet serve [flags]                      the hub (its fleet flags join a fleet)
//	crewlet version (or crewlet --version)
//	crewlet tracker-mcp | knowledge-mcp | artifacts-mcp [flags]   one first-party server on its own
//	crewlet config check [--data-dir DIR] FILE
//	crewlet config default
//	crewlet config import [--store-secrets] [--data-dir DIR] FILE
//	crewlet secrets set|delete [--data-dir DIR] NAME   (set reads the value on stdin)
//	crewlet secrets list [--data-dir DIR]
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/crewlet/hub/cmd/internal/cli"
	"github.com/crewlet/hub/hub"
)

func main() { os.Exit(cli.Main(commands(), os.Args[1:], os.Stdout, os.Stderr)) }

// commands is every command of the binary, the one place they are
// listed: the usage, the dispatch and the tests of both read it.
func commands() *cli.Command {
	return &cli.Command{
		Name:    "crewlet",
		Summary: "Crewlet's MCP hub: every tool of a company's people and AI seats behind one endpoint.",
		Version: hub.Version,
		Subs: []*cli.Command{
			serveCommand(),
			{
				Name:    "version",
				Summary: "Print the hub's version (as `crewlet --version` does).",
				Run:     func([]string) error { _, err := fmt.Println("crewlet", hub.Version); return err },
			},
			standaloneCommand("tracker-mcp"),
			standaloneCommand("knowledge-mcp"),
			standaloneCommand("artifacts-mcp"),
			{
				Name:    "config",
				Summary: "Read, check and write company files.",
				Subs:    []*cli.Command{configCheckCommand(), configDefaultCommand(), configImportCommand()},
			},
			{
				Name:    "secrets",
				Summary: "The hub's secret store, which ${VAR} references resolve from before the environment.",
				Subs:    []*cli.Command{secretsSetCommand(), secretsDeleteCommand(), secretsListCommand()},
			},
		},
	}
}

// newLogger is the JSON log on stderr every command writes; -debug lowers
// its level. Stdout is left to the command (the MCP stream, for stdio).
func newLogger(debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
