package serve

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/secrets"
	"github.com/crewlet/hub/servers/upstream/launch"
)

// Import is `crewlet config import FILE`: the MCP servers a client keeps
// (Claude Desktop, Cursor, VS Code), printed as the company file's
// mcp_servers block on stdout. Literal credentials are never printed: each
// stands as a ${NAME} reference, and with store (the person's consent) its
// value is sealed into the secret store under dataDir; without it, stderr
// says which names to store. The servers are printed trust: pinned, their
// tools held until a person approves them, unless trust says the person
// vouches for them (trust: auto). It returns the exit code.
func Import(stdout, stderr io.Writer, path string, store, trust bool, dataDir string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	im, err := config.ImportClientConfig(data)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", path, err)
		return 1
	}
	if trust {
		im.Trusted()
	} else if len(im.Servers) > 0 {
		fmt.Fprintln(stderr, "note: the servers are trust: pinned, so each of their tools is held until an administrator approves it (Settings › MCP Tools › Tool changes, or decide_tool_change); rerun with --trust to offer them as they list themselves")
	}
	y, err := im.YAML()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	names := slices.Sorted(maps.Keys(im.Secrets))
	if store && len(names) > 0 {
		s, err := secrets.Open(dataDir)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		for _, n := range names {
			if err := s.Set(n, im.Secrets[n]); err != nil {
				fmt.Fprintf(stderr, "sealing %s: %v\n", n, err)
				return 1
			}
			fmt.Fprintf(stderr, "sealed %s in %s\n", n, dataDir)
		}
	} else {
		for _, n := range names {
			fmt.Fprintf(stderr, "%s was a literal credential in %s; store it (%s, value on stdin) or rerun with --store-secrets\n", n, path, launch.SealCommand(n, storeDir(dataDir)))
		}
	}
	for _, a := range im.Asked {
		fmt.Fprintf(stderr, "note: %s asks the person for %q when it starts; store it as %s (%s, value on stdin)\n", a.Server, a.Input, a.Ref, launch.SealCommand(a.Ref, storeDir(dataDir)))
	}
	for _, note := range im.Notes {
		fmt.Fprintln(stderr, "note:", note)
	}
	if _, err := stdout.Write(y); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
