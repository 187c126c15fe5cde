package serve

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/crewlet/hub/hub/config"
)

// CheckFile reports every problem of a company file on w and returns the
// exit code `crewlet config check` ends with: 1 for a document the hub
// would refuse. Unresolved credentials are a property of the machine, not
// of the document: said, not failed, so a file can be checked in CI
// without its secrets.
func CheckFile(stdout, stderr io.Writer, path string, env config.Lookup) int {
	c, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	generated := c.UsesGeneratedToken()
	if _, err := c.OperatorTokens(env); err != nil {
		var v config.Violations
		if errors.As(err, &v) {
			for _, line := range v {
				// The generated token is the hub's to make, not the
				// environment's to carry.
				if generated && strings.Contains(line, config.OperatorTokenVar) {
					continue
				}
				fmt.Fprintln(stderr, "warning (this environment):", line)
			}
		}
	}
	spec, hasModel, err := c.Embeddings(env)
	var v config.Violations
	if errors.As(err, &v) {
		for _, line := range v {
			fmt.Fprintln(stderr, "warning (this environment):", line)
		}
	}
	fmt.Fprintf(stdout, "%s: ok (%d units, %d MCP servers)\n", path, len(c.Units), len(c.MCPServers))
	switch {
	case !hasModel:
		fmt.Fprintln(stdout, "  search: keyword only (no models.embeddings)")
	case err == nil:
		fmt.Fprintf(stdout, "  search: keyword and meaning (%s, at most %d tokens per input)\n", spec.Model, spec.MaxInputTokens)
	default:
		fmt.Fprintf(stdout, "  search: keyword and meaning (%s) once its provider's variables are set\n", c.Models.Embeddings.Model)
	}
	if _, implicit := c.Credentials(); implicit {
		fmt.Fprintf(stdout, "  it declares no operator credential (api.auth.tokens), so the hub generates one on its first start,\n"+
			"  keeps it in DATA_DIR/%s (mode 0600) and prints where it is; $%s, when set, is used instead\n",
			TokenFile, config.OperatorTokenVar)
	}
	return 0
}

// Default writes the embedded company, for a person to copy.
func Default(w io.Writer) error {
	_, err := w.Write(config.DefaultYAML())
	return err
}
