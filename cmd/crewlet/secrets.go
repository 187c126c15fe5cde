package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/crewlet/hub/cmd/internal/cli"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/crewlet/hub/hub/serve"
)

// The secrets commands. The value of set is read from standard input, so
// it never appears in a command line, a process listing or shell history,
// and it is never printed.

// secretsFlags are the flags every secrets command takes.
func secretsFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return fs, fs.String("data-dir", serve.DefaultDataDir, "the hub's data `DIR`, whose secret store this is")
}

func secretsSetCommand() *cli.Command {
	fs, dataDir := secretsFlags("set")
	return &cli.Command{
		Name:    "set",
		Args:    []string{"NAME"},
		Flags:   fs,
		Summary: "Seal the value on stdin as NAME (a trailing newline is dropped); ${NAME} then resolves to it.",
		Run: func(args []string) error {
			name := args[0]
			if err := secrets.CheckName(name); err != nil {
				return err
			}
			store, err := secrets.Open(*dataDir)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(io.LimitReader(bufio.NewReader(os.Stdin), secrets.MaxValueBytes+2))
			if err != nil {
				return err
			}
			value := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			if err := store.Set(name, value); err != nil {
				return err
			}
			fmt.Printf("sealed %s; POST /config/reload (or send the hub SIGHUP) so servers that reference ${%s} pick it up\n", name, name)
			return nil
		},
	}
}

func secretsDeleteCommand() *cli.Command {
	fs, dataDir := secretsFlags("delete")
	return &cli.Command{
		Name:    "delete",
		Args:    []string{"NAME"},
		Flags:   fs,
		Summary: "Remove the secret NAME from the store.",
		Run: func(args []string) error {
			store, err := secrets.Open(*dataDir)
			if err != nil {
				return err
			}
			ok, err := store.Delete(args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no secret called %s", args[0])
			}
			fmt.Printf("deleted %s\n", args[0])
			return nil
		},
	}
}

func secretsListCommand() *cli.Command {
	fs, dataDir := secretsFlags("list")
	return &cli.Command{
		Name:    "list",
		Flags:   fs,
		Summary: "List the names of the stored secrets, never their values.",
		Run: func([]string) error {
			store, err := secrets.Open(*dataDir)
			if err != nil {
				return err
			}
			for _, n := range store.Names() {
				fmt.Println(n)
			}
			return nil
		},
	}
}
