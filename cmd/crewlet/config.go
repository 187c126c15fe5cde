package main

import (
	"flag"
	"os"

	"github.com/crewlet/hub/cmd/internal/cli"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/serve"
)

// configCheckCommand is `crewlet config check [--data-dir DIR] FILE`.
func configCheckCommand() *cli.Command {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	dataDir := fs.String("data-dir", serve.DefaultDataDir, "the hub's data `DIR`, whose secret store ${VAR}s resolve from before the environment (read, never written)")
	return &cli.Command{
		Name:    "check",
		Args:    []string{"FILE"},
		Flags:   fs,
		Summary: "Check a company file as `crewlet serve` would before it starts; exit 1 on any problem.",
		About: "Every problem of the document is reported at once. Then every ${VAR} it references is resolved as a hub\n" +
			"started with this data directory and this environment would resolve it; one that does not resolve is named\n" +
			"with the command that stores it. A TLS pair it names must load.",
		Run: func(args []string) error {
			if code := serve.CheckFile(os.Stdout, os.Stderr, args[0], *dataDir, os.LookupEnv); code != 0 {
				return cli.Exit(code)
			}
			return nil
		},
	}
}

// configDefaultCommand is `crewlet config default`.
func configDefaultCommand() *cli.Command {
	return &cli.Command{
		Name:    "default",
		Summary: "Print the embedded default company, the one `crewlet serve` runs without --config.",
		Run:     func([]string) error { return serve.Default(os.Stdout) },
	}
}

// configImportCommand is `crewlet config import FILE [--store-secrets]
// [--trust] [--data-dir DIR]`.
func configImportCommand() *cli.Command {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	store := fs.Bool("store-secrets", false, "seal the literal credentials found into the secret store (else they are only named)")
	trust := fs.Bool("trust", false, "mark the servers trust: auto, their tools offered as they list them (else trust: pinned: held until a person approves each)")
	dataDir := fs.String("data-dir", serve.DefaultDataDir, "the hub's data `DIR`, whose secret store takes them")
	return &cli.Command{
		Name:    "import",
		Args:    []string{"FILE"},
		Flags:   fs,
		Summary: "Print the MCP servers of a Claude Desktop, Cursor or VS Code config as an mcp_servers block.",
		Run: func(args []string) error {
			if code := serve.Import(os.Stdout, os.Stderr, args[0], *store, *trust, *dataDir); code != 0 {
				return cli.Exit(code)
			}
			return nil
		},
	}
}

// loadCompany reads a company file, every problem at once.
func loadCompany(path string) (*config.Company, error) { return config.Load(path) }
