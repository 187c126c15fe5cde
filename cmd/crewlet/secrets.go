package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/crewlet/hub/hub/secrets"
)

// secretsCmd is `crewlet secrets set|delete NAME` and `crewlet secrets list`.
// The value of set is read from standard input, so it never appears in a
// command line, a process listing or shell history, and it is never printed.
func secretsCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: crewlet secrets set|delete NAME [--data-dir DIR] | crewlet secrets list [--data-dir DIR]")
	}
	verb := args[0]
	fs := flag.NewFlagSet("secrets", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "./.crewlet", "the hub's data directory")
	var name string
	rest := args[1:]
	if verb != "list" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return fmt.Errorf("crewlet secrets %s needs a NAME", verb)
		}
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	store, err := secrets.Open(*dataDir)
	if err != nil {
		return err
	}
	switch verb {
	case "set":
		if err := secrets.CheckName(name); err != nil {
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
	case "delete":
		ok, err := store.Delete(name)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no secret called %s", name)
		}
		fmt.Printf("deleted %s\n", name)
	case "list":
		for _, n := range store.Names() {
			fmt.Println(n)
		}
	default:
		return fmt.Errorf("unknown secrets command %q", verb)
	}
	return nil
}
