package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/serve"
)

// configCheck is `crewlet config check FILE`; it returns the exit code.
func configCheck(path string) int { return serve.CheckFile(os.Stdout, os.Stderr, path, os.LookupEnv) }

// loadCompany reads a company file, every problem at once.
func loadCompany(path string) (*config.Company, error) { return config.Load(path) }

// configImport is `crewlet config import FILE [--store-secrets]
// [--data-dir DIR]`; it returns the exit code.
func configImport(args []string) int {
	fs := flag.NewFlagSet("config import", flag.ContinueOnError)
	store := fs.Bool("store-secrets", false, "seal the literal credentials found into the secret store (else they are only named)")
	dataDir := fs.String("data-dir", "./.crewlet", "the hub's data directory, whose secret store takes them")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(os.Stderr, "usage: crewlet config import FILE [--store-secrets] [--data-dir DIR]")
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	return serve.Import(os.Stdout, os.Stderr, args[0], *store, *dataDir)
}

// printDefault is `crewlet config default`.
func printDefault() error { return serve.Default(os.Stdout) }
