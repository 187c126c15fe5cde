package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/crewlet/hub/hub/config"
)

// configCheck reports every problem of a company file and returns the exit
// code: 1 for a document the hub would refuse.
func configCheck(path string) int {
	c, err := loadCompany(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Unresolved credentials are a property of this machine, not of the
	// document: said, but not failed, so a file can be checked in CI
	// without its secrets.
	if _, err := c.OperatorTokens(os.LookupEnv); err != nil {
		var v config.Violations
		if errors.As(err, &v) {
			for _, line := range v {
				fmt.Fprintln(os.Stderr, "warning (this environment):", line)
			}
		}
	}
	fmt.Printf("%s: ok (%d units, %d MCP servers)\n", path, len(c.Units), len(c.MCPServers))
	return 0
}

func loadCompany(path string) (*config.Company, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func printDefault() error {
	_, err := os.Stdout.Write(config.DefaultYAML())
	return err
}
