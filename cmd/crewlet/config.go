package main

import (
	"os"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/serve"
)

// configCheck is `crewlet config check FILE`; it returns the exit code.
func configCheck(path string) int { return serve.CheckFile(os.Stdout, os.Stderr, path, os.LookupEnv) }

// loadCompany reads a company file, every problem at once.
func loadCompany(path string) (*config.Company, error) { return config.Load(path) }

// printDefault is `crewlet config default`.
func printDefault() error { return serve.Default(os.Stdout) }
