package config

import (
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// URLs is one URL or a list of them: `public_url: https://hub.example.com`
// and `public_url: [https://a.example.com, https://b.example.com]` both read.
type URLs []string

// UnmarshalYAML takes a scalar as a list of one.
func (u *URLs) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*u = URLs{s}
		return nil
	}
	var l []string
	if n.Kind != yaml.SequenceNode || n.Decode(&l) != nil {
		return fmt.Errorf("public_url is one URL or a list of URLs")
	}
	*u = l
	return nil
}

// PublicURLs are the hub's configured public URLs without a trailing
// slash, as the resource identity compares them.
func (c *Company) PublicURLs() []string {
	out := make([]string, 0, len(c.API.PublicURL))
	for _, u := range c.API.PublicURL {
		out = append(out, strings.TrimSuffix(u, "/"))
	}
	return out
}

// checkPublicURL refuses a public URL a client could not be sent to: the
// resource identity is compared exactly, so it must be an absolute http(s)
// URL with no query, fragment or credentials; and with no path, since the
// hub's routes and its RFC 9728 document are served at the root.
func (c *Company) checkPublicURL(add func(string, ...any)) {
	seen := map[string]bool{}
	for i, raw := range c.API.PublicURL {
		p := fmt.Sprintf("api.public_url[%d]", i)
		if len(c.API.PublicURL) == 1 {
			p = "api.public_url"
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Opaque != "":
			add("%s: %q is not an absolute http(s) URL such as https://hub.example.com", p, raw)
		case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			add("%s: %q has credentials, a query or a fragment; the hub's URL has none", p, raw)
		case u.Path != "" && u.Path != "/":
			add("%s: %q has a path; the hub serves its routes at the root, so its URL is scheme and host alone", p, raw)
		case u.Port() != "" && !allDigits(u.Port()):
			add("%s: %q has a port that is not a number", p, raw)
		case seen[strings.TrimSuffix(raw, "/")]:
			add("%s: %q is listed twice", p, raw)
		}
		seen[strings.TrimSuffix(raw, "/")] = true
	}
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
