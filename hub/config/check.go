package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/crewlet/hub/servers/upstream"
	"github.com/go-playground/validator/v10"
)

var (
	slugRe       = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	projectKeyRe = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,9}$`)
	toolPrefixRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)
	surfaceRe    = regexp.MustCompile(`^[a-z][a-z0-9_.:-]{0,63}$`)
	wholeRefRe   = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)
)

// Backends the engine can honour. A vendor tracker or knowledge base is
// reached through its own MCP server, so choosing one means "register none of
// the native tools", which the engine can do.
var (
	trackerBackends   = []string{"native", "jira", "gitlab", "github"}
	knowledgeBackends = []string{"native", "confluence"}
)

// annotationKeys are the tool_annotations keys, in both spellings (CAT-9).
var annotationKeys = map[string]bool{
	"read_only": true, "readOnlyHint": true,
	"destructive": true, "destructiveHint": true,
	"idempotent": true, "idempotentHint": true,
	"open_world": true, "openWorldHint": true,
}

var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		return name
	})
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(v.RegisterValidation("slug", func(fl validator.FieldLevel) bool { return slugRe.MatchString(fl.Field().String()) }))
	must(v.RegisterValidation("projectkey", func(fl validator.FieldLevel) bool { return projectKeyRe.MatchString(fl.Field().String()) }))
	must(v.RegisterValidation("toolprefix", func(fl validator.FieldLevel) bool { return toolPrefixRe.MatchString(fl.Field().String()) }))
	return v
}()

// check applies every rule and returns every violation.
func (c *Company) check() Violations {
	var out Violations
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	var verrs validator.ValidationErrors
	if err := validate.Struct(c); errors.As(err, &verrs) {
		for _, e := range verrs {
			add("%s: %s", yamlPath(e.Namespace()), describe(e))
		}
	} else if err != nil {
		add("%v", err)
	}

	if len(c.Integrations) > 0 {
		add("integrations: this build routes no third-party app (%s); remove the block rather than have it silently do nothing", strings.Join(keys(c.Integrations), ", "))
	}
	if b := c.Tracker.Backend; b != "" && !contains(trackerBackends, b) {
		add("tracker.backend: %q is not one of %s", b, strings.Join(trackerBackends, ", "))
	}
	if b := c.Knowledge.Backend; b != "" && !contains(knowledgeBackends, b) {
		add("knowledge.backend: %q is not one of %s", b, strings.Join(knowledgeBackends, ", "))
	}

	c.checkModels(add)
	c.checkBudget(add)
	c.checkSandbox(add)
	c.checkLimits(add)
	if t := c.API.TLS; (t.CertFile == "") != (t.KeyFile == "") {
		add("api.tls: name both cert_file and key_file, or neither; half a pair would serve plain HTTP where HTTPS was meant")
	}

	servers := map[string]bool{}
	for i, s := range c.MCPServers {
		p := fmt.Sprintf("mcp_servers[%d]", i)
		if s.Name != "" {
			if servers[s.Name] {
				add("%s.name: %q is declared twice", p, s.Name)
			}
			servers[s.Name] = true
		}
		switch s.EffectiveTransport() {
		case "stdio":
			if s.Command == "" {
				add("%s: a stdio server needs a command", p)
			}
			if s.URL != "" {
				add("%s.url: a stdio server is started by its command, not dialled; remove url or set transport: http", p)
			}
			if len(s.Headers) > 0 {
				add("%s.headers: a stdio server takes env, not headers", p)
			}
		case "http", "sse":
			if s.URL == "" {
				add("%s: an %s server needs a url", p, s.EffectiveTransport())
			} else if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") && !strings.HasPrefix(s.URL, "${") {
				add("%s.url: %q is not an http(s) URL", p, upstream.MaskURLs(s.URL))
			}
			if s.Command != "" || len(s.Args) > 0 {
				add("%s: an %s server is dialled at its url; command and args are for stdio", p, s.EffectiveTransport())
			}
			if len(s.Env) > 0 {
				add("%s.env: an %s server takes headers, not env", p, s.EffectiveTransport())
			}
		}
		checkLaunchText(p, s, add)
		checkServerOAuth(p, s, add)
		if d := s.Delivers; d != nil {
			switch {
			case *d == "":
				add("%s.delivers: \"\" would say its tools reach nobody; only a tool's own read-only hints say that, so name the surface or leave the key out", p)
			case !surfaceRe.MatchString(*d):
				add("%s.delivers: %q must be a surface name: lower-case letters, digits, '_', '.', ':' or '-', starting with a letter (chat, mcp:relay)", p, *d)
			}
		}
		for tool, ann := range s.ToolAnnotations {
			for k := range ann {
				if !annotationKeys[k] {
					add("%s.tool_annotations.%s: %q is not a hint (read_only, destructive, idempotent, open_world, or their camelCase forms)", p, tool, k)
				}
			}
		}
	}

	// CFG-4: optional_keys declarations that would leave nothing out are
	// refused when the document is written, as are two spellings of one
	// header.
	for i, srv := range c.MCPServers {
		for _, v := range upstream.CheckOptionalKeys(srv.Declared(), c.blocksFor(srv.Name)) {
			add("mcp_servers[%d]: %s", i, v)
		}
	}

	// Seats: handles unique across the company, whatever their case.
	handles := map[string]string{} // lower handle -> path
	seatKind := map[string]string{}
	seatAdmin := map[string]bool{}
	checkRole := func(p string, r Role) {
		if r.Handle != "" {
			lh := strings.ToLower(r.Handle)
			if prev, dup := handles[lh]; dup {
				add("%s.handle: %q is already the handle of %s", p, r.Handle, prev)
			} else {
				handles[lh] = p
				seatKind[lh] = r.kind()
				seatAdmin[lh] = r.kind() == "human" && r.Admin
			}
		}
		if r.kind() == "human" && len(r.MCPEnv) > 0 {
			add("%s.mcp_env: a person runs no tools, so a human seat may not carry mcp_env", p)
		}
		if r.kind() == "agent" && r.Admin {
			add("%s.admin: only a person can be an administrator", p)
		}
		if r.kind() == "agent" && (len(r.ContactIDs) > 0 || r.Withheld) {
			add("%s: contact_ids and withheld describe a person; this seat is an agent", p)
		}
		if len(r.Integrations) > 0 {
			add("%s.integrations: this build routes no third-party app (%s); remove the block rather than have it silently do nothing", p, strings.Join(keys(r.Integrations), ", "))
		}
		checkMCPEnv(p, r.MCPEnv, servers, add)
		c.checkRoleModel(p, r, add)
	}
	for i, r := range c.Roles {
		checkRole(fmt.Sprintf("roles[%d]", i), r)
	}
	units := map[string]bool{}
	for i, u := range c.Units {
		if u.ID != "" {
			if units[u.ID] {
				add("units[%d].id: %q is declared twice", i, u.ID)
			}
			units[u.ID] = true
		}
	}
	projects := map[string]string{}
	for i, u := range c.Units {
		p := fmt.Sprintf("units[%d]", i)
		for j, r := range u.Roles {
			checkRole(fmt.Sprintf("%s.roles[%d]", p, j), r)
		}
		checkMCPEnv(p, u.MCPEnv, servers, add)
		if u.Parent != "" && !units[u.Parent] {
			add("%s.parent: no unit has id %q", p, u.Parent)
		}
		if u.Parent != "" && u.Parent == u.ID {
			add("%s.parent: a unit cannot be its own parent", p)
		}
		if u.Project != "" {
			if prev, dup := projects[u.Project]; dup {
				add("%s.project: %q is already the project of %s", p, u.Project, prev)
			}
			projects[u.Project] = p
		}
	}
	for i, u := range c.Units {
		if u.Lead != "" {
			if _, ok := handles[strings.ToLower(u.Lead)]; !ok {
				add("units[%d].lead: no seat has handle %q", i, u.Lead)
			}
		}
	}

	c.checkAdminCredential(seatAdmin, add)
	c.checkOAuth(add)
	c.checkPublicURL(add)
	tokenIDs := map[string]bool{}
	for i, t := range c.API.Auth.Tokens {
		p := fmt.Sprintf("api.auth.tokens[%d]", i)
		if t.ID != "" {
			if tokenIDs[t.ID] {
				add("%s.id: %q is declared twice", p, t.ID)
			}
			tokenIDs[t.ID] = true
		}
		if t.Token != "" && !wholeRefRe.MatchString(t.Token) {
			add("%s.token: write the token as a ${VARIABLE} reference; a secret does not belong in the company file", p)
		}
		if t.Seat != "" {
			switch kind, ok := seatKind[strings.ToLower(t.Seat)]; {
			case !ok:
				add("%s.seat: no seat has handle %q", p, t.Seat)
			case kind != "human":
				add("%s.seat: %q is an agent seat; a token binds to a person", p, t.Seat)
			}
			if t.Admin {
				add("%s.admin: a token bound to a seat has its seat's rights; set admin on the seat", p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkAdminCredential refuses declared credentials none of which is an
// administrator's: applied, they would leave nobody who can reload the
// company, fix its servers or see them (a token whose administrator line
// was cut off reads like this). A company that declares none is given the
// generated one, an administrator's.
func (c *Company) checkAdminCredential(seatAdmin map[string]bool, add func(string, ...any)) {
	tokens := c.API.Auth.Tokens
	if len(tokens) == 0 {
		return
	}
	for _, t := range tokens {
		if (t.Seat == "" && t.Admin) || (t.Seat != "" && seatAdmin[strings.ToLower(t.Seat)]) {
			return
		}
	}
	add("api.auth.tokens: none of these credentials is an administrator's, so applied they would leave nobody " +
		"who can reload the company or see its servers; bind one to a person with admin: true, or set admin: true on an unbound one")
}

func checkMCPEnv(p string, env map[string]map[string]string, servers map[string]bool, add func(string, ...any)) {
	for name := range env {
		if !servers[name] {
			add("%s.mcp_env.%s: no MCP server is called %q", p, name, name)
		}
	}
}

func (r Role) kind() string {
	if r.Kind == "" {
		return "agent"
	}
	return r.Kind
}

// yamlPath turns the validator's "Company.units[0].id" into "units[0].id".
func yamlPath(ns string) string {
	_, rest, ok := strings.Cut(ns, ".")
	if !ok {
		return ns
	}
	return rest
}

func describe(e validator.FieldError) string {
	switch e.Tag() {
	case "required":
		return "is required"
	case "slug":
		return fmt.Sprintf("%q must be lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", e.Value())
	case "projectkey":
		return fmt.Sprintf("%q must be 2 to 10 upper-case letters or digits, starting with a letter", e.Value())
	case "toolprefix":
		return fmt.Sprintf("%q must be up to 32 letters, digits, '_', '.' or '-'", e.Value())
	case "oneof":
		return fmt.Sprintf("%q is not one of %s", e.Value(), strings.ReplaceAll(e.Param(), " ", ", "))
	case "max":
		return fmt.Sprintf("is longer than %s", e.Param())
	case "gte", "lte":
		return fmt.Sprintf("%v is out of range (%s %s)", e.Value(), e.Tag(), e.Param())
	}
	return fmt.Sprintf("fails %s", e.Tag())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
