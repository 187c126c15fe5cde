package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Imported is what `crewlet config import` makes of the MCP servers a
// client already has written down (Claude Desktop's and Cursor's
// mcpServers, VS Code's servers): the mcp_servers entries, the literal
// secrets taken out of them, and what a person should know about the
// conversion.
type Imported struct {
	Servers []MCPServer
	// Secrets are the literal secret values lifted out of env and header
	// values, by the ${NAME} that now stands in their place. They are for
	// the secret store, never for printing.
	Secrets map[string]string
	// Notes say what the conversion could not carry over as it was.
	Notes []string
	// Asked are the values a client asks its person for as a server
	// starts (VS Code's inputs), each now a ${NAME} for the secret store.
	// The caller says how to seal each, naming the store it writes to.
	Asked []Asked
}

// Asked is one value a client asked its person for.
type Asked struct {
	// Server asks for Input, which now stands as ${Ref}.
	Server, Input, Ref string
}

// clientServer is one server as the three clients write it.
type clientServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// Disabled servers (Cursor, Claude Desktop) are carried over as
	// notes, not as servers.
	Disabled bool `json:"disabled"`
}

type clientFile struct {
	MCPServers map[string]clientServer `json:"mcpServers"` // Claude Desktop, Cursor
	Servers    map[string]clientServer `json:"servers"`    // VS Code (.vscode/mcp.json)
	MCP        *struct {
		Servers map[string]clientServer `json:"servers"` // VS Code settings.json
	} `json:"mcp"`
}

var (
	vscodeEnvRE   = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)
	vscodeInputRE = regexp.MustCompile(`\$\{input:([A-Za-z0-9_.-]+)\}`)
	referenceRE   = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)
	notNameRE     = regexp.MustCompile(`[^A-Z0-9_]+`)
	notSlugRE     = regexp.MustCompile(`[^a-z0-9._-]+`)
	// secretKeyRE matches the env and header names whose literal values
	// are credentials.
	secretKeyRE = regexp.MustCompile(`(?i)(token|secret|password|passwd|api[_-]?key|apikey|auth|credential|private[_-]?key|access[_-]?key|cookie|session)`)
)

// ImportClientConfig converts a client's MCP configuration (JSON) into
// mcp_servers entries. Literal values of env variables and headers whose
// names say they are credentials (tokens, keys, passwords, Authorization)
// are lifted out into Secrets behind ${NAME} references; VS Code's
// ${env:VAR} becomes ${VAR}, and its ${input:id} a ${NAME} the person
// must store. Nothing here reads or writes the secret store.
func ImportClientConfig(data []byte) (Imported, error) {
	var f clientFile
	if err := json.Unmarshal(stripJSONComments(data), &f); err != nil {
		return Imported{}, fmt.Errorf("not an MCP client configuration (JSON with mcpServers or servers): %w", err)
	}
	servers := f.MCPServers
	if len(servers) == 0 {
		servers = f.Servers
	}
	if len(servers) == 0 && f.MCP != nil {
		servers = f.MCP.Servers
	}
	if len(servers) == 0 {
		return Imported{}, errors.New("the file declares no MCP servers (no mcpServers, servers or mcp.servers object)")
	}
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	// In name order, as the hub will name them.
	sort.Slice(names, func(i, j int) bool {
		if a, b := slugOf(names[i]), slugOf(names[j]); a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	out := Imported{Secrets: map[string]string{}}
	used := map[string]bool{}
	for _, n := range names {
		cs := servers[n]
		name := slugOf(n)
		for base, i := name, 2; used[name]; i++ {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		used[name] = true
		if name != n {
			out.Notes = append(out.Notes, fmt.Sprintf("%q is named %s here (a server name is lower-case letters, digits and . _ -).", n, name))
		}
		if cs.Disabled {
			out.Notes = append(out.Notes, fmt.Sprintf("%s was disabled in the client and is left out.", name))
			continue
		}
		// An imported server's tools were never reviewed here: they are
		// held until a person approves them (issue 28), unless the
		// person importing says they trust them (Imported.Trusted).
		s := MCPServer{Name: name, Command: cs.Command, Args: cs.Args, URL: cs.URL, Trust: TrustPinned}
		switch strings.ToLower(cs.Type) {
		case "", "stdio", "local":
		case "http", "streamable-http", "streamablehttp":
			s.Transport = "http"
		case "sse":
			s.Transport = "sse"
		default:
			out.Notes = append(out.Notes, fmt.Sprintf("%s has type %q, which this hub does not know; check its transport.", name, cs.Type))
		}
		if s.Command == "" && s.URL == "" {
			out.Notes = append(out.Notes, fmt.Sprintf("%s names neither a command nor a url and is left out.", name))
			continue
		}
		s.Env = out.values(name, "", cs.Env)
		s.Headers = out.values(name, "HEADER_", cs.Headers)
		s.URL = out.urlReference(name, s.URL)
		s.Args = out.args(name, s.Args)
		out.Servers = append(out.Servers, s)
	}
	return out, nil
}

// values converts one env or headers map.
func (im *Imported) values(server, prefix string, in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = im.reference(server, prefix+k, v, secretKeyRE.MatchString(k))
	}
	return out
}

// reference rewrites a client's variable references into ${VAR} and, for
// a credential's literal value, lifts it into Secrets and answers its
// reference. An argument or url is kept as written (the hub passes args as
// they are), only its client references converted.
func (im *Imported) reference(server, key, v string, secret bool) string {
	v = vscodeEnvRE.ReplaceAllString(v, "$${$1}")
	v = vscodeInputRE.ReplaceAllStringFunc(v, func(m string) string {
		id := vscodeInputRE.FindStringSubmatch(m)[1]
		ref := envName(server, "INPUT_"+id)
		im.Asked = append(im.Asked, Asked{Server: server, Input: id, Ref: ref})
		return "${" + ref + "}"
	})
	if !secret || v == "" || referenceRE.MatchString(v) {
		return v
	}
	ref := envName(server, key)
	im.Secrets[ref] = v
	// A header like "Bearer <token>" keeps its scheme in the file and its
	// credential in the store.
	if scheme, cred, ok := strings.Cut(v, " "); ok && (strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Basic") || strings.EqualFold(scheme, "Token")) {
		im.Secrets[ref] = cred
		return scheme + " ${" + ref + "}"
	}
	return "${" + ref + "}"
}

// args converts a command's arguments: a credential passed as
// --token=VALUE or as --token VALUE is lifted like an env value.
func (im *Imported) args(server string, in []string) []string {
	out := make([]string, len(in))
	for i, a := range in {
		flag, value, hasValue := strings.Cut(a, "=")
		isFlag := strings.HasPrefix(flag, "-")
		switch {
		case isFlag && hasValue:
			out[i] = flag + "=" + im.reference(server, "ARG_"+strings.TrimLeft(flag, "-"), value, secretKeyRE.MatchString(flag))
		case i > 0 && strings.HasPrefix(in[i-1], "-") && !strings.Contains(in[i-1], "=") && secretKeyRE.MatchString(in[i-1]) && !strings.HasPrefix(a, "-"):
			out[i] = im.reference(server, "ARG_"+strings.TrimLeft(in[i-1], "-"), a, true)
		default:
			out[i] = im.reference(server, "", a, false)
		}
	}
	return out
}

// urlReference converts a url: query values whose names say they are
// credentials are lifted (userinfo too), the rest kept.
func (im *Imported) urlReference(server, raw string) string {
	raw = im.reference(server, "", raw, false)
	if raw == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && !referenceRE.MatchString(pw) {
			u.User = url.UserPassword(u.User.Username(), im.reference(server, "URL_PASSWORD", pw, true))
		}
	}
	q := u.Query()
	changed := false
	for k, vs := range q {
		for j, v := range vs {
			if secretKeyRE.MatchString(k) && !referenceRE.MatchString(v) {
				vs[j], changed = im.reference(server, "URL_"+k, v, true), true
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	out := u.String()
	// url.String escapes the ${...} it must keep as written.
	return strings.NewReplacer("%24%7B", "${", "%7D", "}", "$%7B", "${").Replace(out)
}

// envName is the secret's name: the server's and the key's, upper-cased.
func envName(server, key string) string {
	n := notNameRE.ReplaceAllString(strings.ToUpper(server+"_"+key), "_")
	return strings.Trim(n, "_")
}

// slugOf makes a client's server name a valid server name.
func slugOf(n string) string {
	s := strings.Trim(notSlugRE.ReplaceAllString(strings.ToLower(n), "-"), "-._")
	if s == "" {
		s = "server"
	}
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// stripJSONComments drops // and /* */ comments outside strings, as VS
// Code's configuration files allow them.
func stripJSONComments(data []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString:
			out = append(out, c)
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			if i < len(data) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			i += 2
			for i+1 < len(data) && (data[i] != '*' || data[i+1] != '/') {
				i++
			}
			i++
		default:
			out = append(out, c)
		}
	}
	return out
}

// YAML renders the imported servers as a company file's mcp_servers
// block. It holds references, never the lifted secrets.
func (im Imported) YAML() ([]byte, error) {
	type entry struct {
		Name      string            `yaml:"name"`
		Transport string            `yaml:"transport,omitempty"`
		Command   string            `yaml:"command,omitempty"`
		Args      []string          `yaml:"args,omitempty"`
		URL       string            `yaml:"url,omitempty"`
		Env       map[string]string `yaml:"env,omitempty"`
		Headers   map[string]string `yaml:"headers,omitempty"`
		Trust     string            `yaml:"trust,omitempty"`
	}
	doc := struct {
		MCPServers []entry `yaml:"mcp_servers"`
	}{}
	for _, s := range im.Servers {
		doc.MCPServers = append(doc.MCPServers, entry{Name: s.Name, Transport: s.Transport, Command: s.Command, Args: s.Args, URL: s.URL, Env: s.Env, Headers: s.Headers, Trust: s.Trust})
	}
	return yaml.Marshal(doc)
}

// Trusted marks every imported server trust: auto, for the person who
// says the servers are their own: their tools are offered as they list
// them, with no approval.
func (im *Imported) Trusted() {
	for i := range im.Servers {
		im.Servers[i].Trust = TrustAuto
	}
}
