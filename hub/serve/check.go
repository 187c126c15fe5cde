package serve

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/secrets"
)

// CheckFile reports every problem of a company file and returns the exit
// code `crewlet config check` ends with: 1 for a document the hub would
// refuse, and 1 for a document a hub started with it, on data directory
// dataDir in this environment (env), would meet problems with (Preflight:
// a ${VAR} neither the secret store nor env holds, a TLS pair that does
// not load). It reads the secret store, never writes it: a data directory
// that does not exist yet holds nothing.
func CheckFile(stdout, stderr io.Writer, path, dataDir string, env config.Lookup) int {
	c, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	lookup := env
	if _, err := os.Stat(dataDir); err == nil {
		store, err := secrets.Open(dataDir)
		if err != nil {
			fmt.Fprintf(stderr, "%s: the secret store: %v\n", dataDir, err)
			return 1
		}
		lookup = func(name string) (string, bool) {
			if v, ok := store.Lookup(name); ok {
				return v, true
			}
			return env(name)
		}
	}
	problems := Preflight(c, Start{ConfigFile: path, DataDir: dataDir, Env: lookup})

	if len(problems) == 0 {
		fmt.Fprintf(stdout, "%s: ok (%s, %s)\n", path, count(len(c.Units), "unit", "units"), count(len(c.MCPServers), "MCP server", "MCP servers"))
	}
	spec, hasModel, err := c.Embeddings(lookup)
	switch {
	case !hasModel:
		fmt.Fprintln(stdout, "  search: keyword only (no models.embeddings)")
	case err == nil:
		fmt.Fprintf(stdout, "  search: keyword and meaning (%s, at most %d tokens per input)\n", spec.Model, spec.MaxInputTokens)
	default:
		fmt.Fprintf(stdout, "  search: keyword and meaning (%s) once its provider's variables are set\n", c.Models.Embeddings.Model)
	}
	fmt.Fprintln(stdout, "  "+sandboxLine(c))
	if _, implicit := c.Credentials(); implicit {
		fmt.Fprintf(stdout, "  it declares no operator credential (api.auth.tokens), so the hub generates one on its first start,\n"+
			"  keeps it in DATA_DIR/%s (mode 0600) and prints where it is; $%s, when set, is used instead\n",
			TokenFile, config.OperatorTokenVar)
	}
	if len(problems) == 0 {
		return 0
	}
	fmt.Fprintf(stderr, "%s: the document is sound, but a hub started on it with data directory %s and this environment would meet %s:\n",
		path, dataDir, count(len(problems), "problem", "problems"))
	for _, p := range problems {
		fmt.Fprintf(stderr, "  - %s\n", strings.ReplaceAll(p.Text, "\n", "\n    "))
	}
	return 1
}

// Default writes the embedded company, for a person to copy.
func Default(w io.Writer) error {
	_, err := w.Write(config.DefaultYAML())
	return err
}

// count is n with its noun, in the singular for one.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
