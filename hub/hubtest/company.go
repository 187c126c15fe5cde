package hubtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/hub/config"
)

// Company builds a company document for a test: one unit, the seats, the
// operator tokens and the MCP servers it is given, written as YAML so the
// document a test runs is the one a person could write.
//
//	doc := hubtest.NewCompany().Person("ada", true).Agent("bot").
//		Token("laptop", "ADA_TOKEN", "ada").Server(`{name: echo, url: "http://..."}`)
type Company struct {
	roles   []string
	tokens  []string
	servers []string
	extra   []string
	oauth   string
	// publicURL is api.public_url.
	publicURL []string
}

// NewCompany starts an empty company with one unit, core.
func NewCompany() *Company { return &Company{} }

// Person adds a human seat.
func (c *Company) Person(handle string, admin bool) *Company {
	c.roles = append(c.roles, fmt.Sprintf("{name: %s, handle: %s, kind: human, admin: %v}", handle, handle, admin))
	return c
}

// Agent adds an agent seat; mcpEnv, when given, is its mcp_env block as a
// YAML flow mapping ({server: {KEY: value}}).
func (c *Company) Agent(handle string, mcpEnv ...string) *Company {
	role := fmt.Sprintf("{name: %s, handle: %s", handle, handle)
	if len(mcpEnv) > 0 {
		role += ", mcp_env: " + mcpEnv[0]
	}
	c.roles = append(c.roles, role+"}")
	return c
}

// Token adds an operator credential read from the variable; seat binds it
// to a person, "" leaves it unbound.
func (c *Company) Token(id, variable, seat string) *Company {
	tok := fmt.Sprintf(`{id: %s, token: "${%s}"`, id, variable)
	if seat != "" {
		tok += ", seat: " + seat
	}
	c.tokens = append(c.tokens, tok+"}")
	return c
}

// AdminToken adds an unbound administrator's credential.
func (c *Company) AdminToken(id, variable string) *Company {
	c.tokens = append(c.tokens, fmt.Sprintf(`{id: %s, token: "${%s}", admin: true}`, id, variable))
	return c
}

// Role adds a seat written as a YAML flow mapping, for keys the helpers
// above do not set ({name: Ada, handle: ada, kind: human, email: ...}).
func (c *Company) Role(flow string) *Company {
	c.roles = append(c.roles, flow)
	return c
}

// OAuth sets api.auth.oauth, as a YAML flow mapping ({issuer: ...}).
func (c *Company) OAuth(flow string) *Company {
	c.oauth = flow
	return c
}

// PublicURL sets api.public_url, the URLs the hub is reached at.
func (c *Company) PublicURL(urls ...string) *Company {
	c.publicURL = append(c.publicURL, urls...)
	return c
}

// Server adds an mcp_servers entry, as a YAML flow mapping.
func (c *Company) Server(entry string) *Company {
	c.servers = append(c.servers, entry)
	return c
}

// With adds top-level YAML as written (tracker: {backend: jira}).
func (c *Company) With(yaml string) *Company {
	c.extra = append(c.extra, yaml)
	return c
}

// YAML is the document.
func (c *Company) YAML() string {
	var b strings.Builder
	if len(c.roles) > 0 {
		b.WriteString("units:\n  - id: core\n    name: Core\n    roles:\n")
		for _, r := range c.roles {
			b.WriteString("      - " + r + "\n")
		}
	}
	if len(c.tokens) > 0 || c.oauth != "" || len(c.publicURL) > 0 {
		b.WriteString("api:\n")
	}
	if len(c.publicURL) > 0 {
		b.WriteString("  public_url: [" + strings.Join(c.publicURL, ", ") + "]\n")
	}
	if len(c.tokens) > 0 || c.oauth != "" {
		b.WriteString("  auth:\n")
	}
	if len(c.tokens) > 0 {
		b.WriteString("    tokens:\n")
		for _, t := range c.tokens {
			b.WriteString("      - " + t + "\n")
		}
	}
	if c.oauth != "" {
		b.WriteString("    oauth: " + c.oauth + "\n")
	}
	if len(c.servers) > 0 {
		b.WriteString("mcp_servers:\n")
		for _, s := range c.servers {
			b.WriteString("  - " + s + "\n")
		}
	}
	for _, e := range c.extra {
		b.WriteString(e + "\n")
	}
	return b.String()
}

// Parse checks the document and fails the test if the hub would refuse it.
func (c *Company) Parse(t testing.TB) *config.Company {
	t.Helper()
	co, err := config.Parse([]byte(c.YAML()))
	if err != nil {
		t.Fatalf("company fixture:\n%s\n%v", c.YAML(), err)
	}
	return co
}

// Write puts the document in a file under the test's temporary directory.
func (c *Company) Write(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "company.yaml")
	if err := os.WriteFile(path, []byte(c.YAML()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Env is a variable lookup a test can change while a hub reads it.
type Env struct {
	mu   sync.Mutex
	vars map[string]string
}

// NewEnv holds vars.
func NewEnv(vars map[string]string) *Env {
	e := &Env{vars: map[string]string{}}
	for k, v := range vars {
		e.vars[k] = v
	}
	return e
}

// Lookup resolves a variable, as config.Lookup does.
func (e *Env) Lookup(name string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.vars[name]
	return v, ok
}

// Set changes a variable.
func (e *Env) Set(name, value string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vars[name] = value
}

// Unset removes a variable.
func (e *Env) Unset(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.vars, name)
}
