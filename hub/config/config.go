// Package config reads and checks the company file: units, seats, MCP
// servers, backends and operator credentials. A document is checked whole and
// every violation is reported at once, so an operator fixes a file in one
// pass; keys the engine does not know, and blocks it cannot honour, are
// refused rather than ignored, because a silently dropped block looks exactly
// like one that works.
package config

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Company is one company document.
type Company struct {
	Company      Info                 `yaml:"company"`
	Units        []Unit               `yaml:"units" validate:"dive"`
	Roles        []Role               `yaml:"roles" validate:"dive"`
	MCPServers   []MCPServer          `yaml:"mcp_servers" validate:"dive"`
	Integrations map[string]yaml.Node `yaml:"integrations"`
	Tracker      Backend              `yaml:"tracker"`
	Knowledge    Backend              `yaml:"knowledge"`
	Artifacts    Artifacts            `yaml:"artifacts"`
	API          API                  `yaml:"api"`
	// Providers are the model vendors' endpoints, by name; Models picks
	// the models the hub uses at them (models.go).
	Providers map[string]Provider `yaml:"providers"`
	Models    Models              `yaml:"models"`
	// Budget sets the token ceilings agent turns spend under (budget.go).
	Budget Budget `yaml:"budget"`
	// Learning says what seats learn from their own turns (learning.go).
	Learning Learning `yaml:"learning"`
	// Sandbox is the box coding runs work in (sandbox.go).
	Sandbox Sandbox `yaml:"sandbox"`
}

// Artifacts is the artifact store's company-wide policy.
type Artifacts struct {
	// AgentsManageOthers lifts the cap that holds an agent to contributor
	// on artifacts it does not own (ART-2): with it, an agent shared an
	// artifact as editor may change its title and its datastore's rules.
	AgentsManageOthers bool `yaml:"agents_manage_others"`
}

// Info names the company.
type Info struct {
	Name string `yaml:"name" validate:"omitempty,max=200"`
}

// Unit is a team or department. Its direct agent seats inherit its mcp_env.
type Unit struct {
	ID      string `yaml:"id" validate:"required,slug"`
	Name    string `yaml:"name" validate:"required,max=200"`
	Type    string `yaml:"type" validate:"omitempty,oneof=team department company"`
	Lead    string `yaml:"lead" validate:"omitempty,slug"`
	Parent  string `yaml:"parent" validate:"omitempty,slug"`
	Project string `yaml:"project" validate:"omitempty,projectkey"`
	Space   string `yaml:"space" validate:"omitempty,max=100"`
	// MCPEnv is keyed by server name, then variable (or header) name.
	MCPEnv map[string]map[string]string `yaml:"mcp_env"`
	Roles  []Role                       `yaml:"roles" validate:"dive"`
}

// Role is one seat: an agent that runs turns, or a person.
type Role struct {
	Name         string                       `yaml:"name" validate:"required,max=200"`
	Handle       string                       `yaml:"handle" validate:"required,slug"`
	Kind         string                       `yaml:"kind" validate:"omitempty,oneof=agent human"`
	Admin        bool                         `yaml:"admin"`
	ContactIDs   []string                     `yaml:"contact_ids" validate:"dive,required,max=320"`
	Withheld     bool                         `yaml:"withheld"`
	MCPEnv       map[string]map[string]string `yaml:"mcp_env"`
	Integrations map[string]yaml.Node         `yaml:"integrations"`
	// Model is the chat model an agent seat runs its turns on: default,
	// auxiliary (the models block's) or provider/model; models.default
	// when empty (chat.go).
	Model string `yaml:"model"`
	// Instructions is what the seat's model is told about its job, beside
	// who it is and the rules every turn keeps.
	Instructions string `yaml:"instructions" validate:"max=65536"`
	// OIDCSubject and Email name the person at the company's identity
	// provider: an access token whose subject is OIDCSubject, or whose
	// verified e-mail is Email, acts as this seat (api.auth.oauth).
	OIDCSubject string `yaml:"oidc_subject" validate:"max=255"`
	Email       string `yaml:"email" validate:"omitempty,email,max=320"`
}

// MCPServer declares a third-party MCP server.
type MCPServer struct {
	Name                  string                     `yaml:"name" validate:"required,slug"`
	Transport             string                     `yaml:"transport" validate:"omitempty,oneof=stdio http sse"`
	Command               string                     `yaml:"command"`
	Args                  []string                   `yaml:"args"`
	URL                   string                     `yaml:"url"`
	Shared                *bool                      `yaml:"shared"`
	Env                   map[string]string          `yaml:"env"`
	Headers               map[string]string          `yaml:"headers"`
	ToolPrefix            string                     `yaml:"tool_prefix" validate:"omitempty,toolprefix"`
	ToolAnnotations       map[string]map[string]bool `yaml:"tool_annotations"`
	OptionalKeys          []string                   `yaml:"optional_keys"`
	StartupTimeoutSeconds int                        `yaml:"startup_timeout_seconds" validate:"gte=0,lte=600"`
	// CallTimeoutSeconds bounds one tool call to the server; 0 means the
	// default (DefaultCallTimeout). A call that outlives it is cancelled
	// at the server and refused unavailable.
	CallTimeoutSeconds int `yaml:"call_timeout_seconds" validate:"gte=0,lte=3600"`
	// Delivers names the surface the server's tools put things in front of
	// people on (CAT-8), when it is not the server itself: a relay that
	// posts to chat delivers to chat. Unset, a tool delivers to its server
	// (mcp:<name>); a tool proven read-only delivers nowhere either way.
	Delivers *string `yaml:"delivers"`
	// Trust says whether a person approves the server's tools before any
	// seat or operator is offered them (issue 28): "pinned" holds a tool
	// that was never approved, or whose definition changed since it was,
	// until a person approves it; "auto" offers whatever the server lists
	// (a developer's own servers). Unset: pinned, except for a server the
	// company already ran when pinning began (the log's baseline), which
	// keeps running as it did.
	Trust string `yaml:"trust" validate:"omitempty,oneof=pinned auto"`
	// Auth "oauth" has each seat's child carry the seat's own grant at the
	// server's authorization server (issue 26); see upstream_oauth.go.
	Auth  string       `yaml:"auth,omitempty" validate:"omitempty,oneof=oauth"`
	OAuth *ServerOAuth `yaml:"oauth,omitempty"`
}

// The two trust values of an MCP server.
const (
	TrustPinned = "pinned"
	TrustAuto   = "auto"
)

// DefaultCallTimeout bounds a call to a third-party tool when its server
// sets no call_timeout_seconds: long enough for a slow search or build
// step, short enough that a server that never answers costs a caller two
// minutes, not forever.
const DefaultCallTimeout = 120 * time.Second

// CallTimeout is how long one call to the server's tools may take.
func (s MCPServer) CallTimeout() time.Duration {
	if s.CallTimeoutSeconds > 0 {
		return time.Duration(s.CallTimeoutSeconds) * time.Second
	}
	return DefaultCallTimeout
}

// IsShared reports the effective shared flag (default true).
func (s MCPServer) IsShared() bool { return s.Shared == nil || *s.Shared }

// EffectiveTransport is the declared transport, or the one the declaration
// implies: a url means http, a command means stdio.
func (s MCPServer) EffectiveTransport() string {
	if s.Transport != "" {
		return s.Transport
	}
	if s.URL != "" && s.Command == "" {
		return "http"
	}
	return "stdio"
}

// Backend picks which tracker or knowledge system the company runs.
type Backend struct {
	Backend string `yaml:"backend"`
}

// API holds the operator surface's credentials and how it is served.
type API struct {
	// PublicURL is the URL (or the URLs) clients reach the hub at, e.g.
	// https://hub.example.com: the resource the identity provider's tokens
	// must be issued for, and what the hub's protected-resource document
	// names. Unset, the address the hub listens on stands for it.
	PublicURL URLs `yaml:"public_url"`
	Auth      Auth `yaml:"auth"`
	TLS       TLS  `yaml:"tls"`
	// Limits caps what one credential may hold of the node (limits.go).
	Limits Limits `yaml:"limits"`
}

// TLS names the certificate and key the hub serves HTTPS with; paths
// relative to the company file's directory. A pair given on the command
// line wins. Both or neither: half a pair is refused.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Auth lists operator bearer tokens and, beside them, the identity provider
// whose access tokens the operator surface also accepts (oauth.go).
type Auth struct {
	Tokens []Token `yaml:"tokens" validate:"dive"`
	OAuth  *OAuth  `yaml:"oauth"`
}

// Token is an operator credential. Its value is always a ${VAR} reference so
// no secret lives in the company file.
type Token struct {
	ID    string `yaml:"id" validate:"required,slug"`
	Token string `yaml:"token" validate:"required"`
	// Seat binds the token to a person: it writes as that seat.
	Seat string `yaml:"seat" validate:"omitempty,slug"`
	// Admin grants an unbound token the administrator's routes; a bound token
	// takes its seat's admin flag instead.
	Admin bool `yaml:"admin"`
}

//go:embed default.yaml
var defaultYAML []byte

// Default is the embedded company a hub runs with no file: one unit, one
// administrator person and one agent seat.
func Default() *Company {
	c, err := Parse(defaultYAML)
	if err != nil {
		panic("config: the embedded default company is invalid: " + err.Error())
	}
	return c
}

// Load reads and checks a company file; every problem comes back at once,
// prefixed with the file's path.
func Load(path string) (*Company, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// DefaultYAML returns the embedded default document, for showing to users.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Violations is every problem found in one document.
type Violations []string

func (v Violations) Error() string {
	if len(v) == 1 {
		return "the company file has 1 problem:\n  - " + v[0]
	}
	return fmt.Sprintf("the company file has %d problems:\n  - %s", len(v), strings.Join(v, "\n  - "))
}

const emptySentence = "the file is empty: it declares nothing (no unit, seat, MCP server, credential or any other block). " +
	"A file that is still being written, or was cut short, reads like this; a company declares at least one of them"

// declaresNothing reports a document with no block in it at all: empty,
// only comments, null or an empty mapping. It reads the document's own
// keys, so a block added to the file's schema later counts without this
// rule having to know it.
func declaresNothing(data []byte) bool {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return false // not valid YAML: said as such, not as empty
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return true
	}
	doc := root.Content[0]
	switch doc.Kind {
	case yaml.MappingNode:
		return len(doc.Content) == 0
	case yaml.ScalarNode:
		return doc.Tag == "!!null"
	}
	return false
}

// Parse decodes and checks a document. Unknown keys, type errors and rule
// violations come back together as Violations. ${VAR} references are not
// resolved here; Resolve does that against an environment.
func Parse(data []byte) (*Company, error) {
	var c Company
	var out Violations
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		var te *yaml.TypeError
		switch {
		case errors.As(err, &te):
			// Keep going: the rest of the document decoded, and its rule
			// violations belong in the same report.
			for _, e := range te.Errors {
				out = append(out, unknownKey(e))
			}
		case err.Error() == "EOF":
			// No document at all: see below.
		default:
			return nil, Violations{syntaxError(data, err)}
		}
	}
	if declaresNothing(data) {
		// A file an editor is still writing, or one truncated to nothing,
		// reads as an empty company, which would run no seat and no server
		// and trade every credential for the generated one.
		return &c, Violations{emptySentence}
	}
	out = append(out, c.check()...)
	if len(out) > 0 {
		return &c, out
	}
	return &c, nil
}
