package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// OAuth names the company's identity provider: the operator surface accepts
// its access tokens beside the static ones (issue 26). A token is taken only
// if the issuer signed it, it was issued for this hub (Audience, or the
// hub's own resource URL) and it carries every one of RequiredScopes; it
// acts as the person's seat whose oidc_subject or email it names.
type OAuth struct {
	// Issuer is the provider's issuer URL, as its discovery document says
	// it; its keys are read from there and followed as they rotate.
	Issuer string `yaml:"issuer" validate:"required,max=2048"`
	// Audience is the audience the provider writes into tokens for this
	// hub, where it does not write the hub's resource URL.
	Audience       string   `yaml:"audience" validate:"max=2048"`
	RequiredScopes []string `yaml:"required_scopes" validate:"dive,max=200"`
}

// OAuthPerson is a seat an identity provider's token can act as.
type OAuthPerson struct {
	Seat    string
	Subject string
	Email   string
	Admin   bool
}

// OAuthPeople are the people's seats that name an identity at the provider.
func (c *Company) OAuthPeople() []OAuthPerson {
	var out []OAuthPerson
	for _, r := range c.allRoles() {
		if r.kind() != "human" || (r.OIDCSubject == "" && r.Email == "") {
			continue
		}
		out = append(out, OAuthPerson{Seat: r.Handle, Subject: r.OIDCSubject, Email: r.Email, Admin: r.Admin})
	}
	return out
}

type placedRole struct {
	path string
	role Role
}

func (c *Company) placedRoles() []placedRole {
	var out []placedRole
	for i, r := range c.Roles {
		out = append(out, placedRole{fmt.Sprintf("roles[%d]", i), r})
	}
	for i, u := range c.Units {
		for j, r := range u.Roles {
			out = append(out, placedRole{fmt.Sprintf("units[%d].roles[%d]", i, j), r})
		}
	}
	return out
}

// checkOAuth refuses an identity provider the hub could not use, and
// identities that would silently name nobody or two seats at once.
func (c *Company) checkOAuth(add func(string, ...any)) {
	o := c.API.Auth.OAuth
	subjects, emails := map[string]string{}, map[string]string{}
	people := 0
	for _, r := range c.placedRoles() {
		if r.role.OIDCSubject == "" && r.role.Email == "" {
			continue
		}
		if r.role.kind() != "human" {
			add("%s: oidc_subject and email name a person at the identity provider; this seat is an agent", r.path)
			continue
		}
		if o == nil {
			add("%s: names a person at an identity provider, but api.auth.oauth declares none; declare it or remove oidc_subject and email", r.path)
			continue
		}
		people++
		if s := r.role.OIDCSubject; s != "" {
			if prev, dup := subjects[s]; dup {
				add("%s.oidc_subject: %q is already the subject of %s; one identity acts as one seat", r.path, s, prev)
			}
			subjects[s] = r.path
		}
		if e := strings.ToLower(r.role.Email); e != "" {
			if prev, dup := emails[e]; dup {
				add("%s.email: %q is already the e-mail of %s; one identity acts as one seat", r.path, r.role.Email, prev)
			}
			emails[e] = r.path
		}
	}
	if o == nil {
		return
	}
	if o.Issuer != "" {
		if why := issuerProblem(o.Issuer); why != "" {
			add("api.auth.oauth.issuer: %s", why)
		}
	}
	seen := map[string]bool{}
	for i, s := range o.RequiredScopes {
		switch {
		case s == "" || strings.ContainsAny(s, " \t\r\n\"\\"):
			add("api.auth.oauth.required_scopes[%d]: %q is not a scope (one word, no spaces or quotes)", i, s)
		case seen[s]:
			add("api.auth.oauth.required_scopes[%d]: %q is listed twice", i, s)
		}
		seen[s] = true
	}
	if people == 0 {
		add("api.auth.oauth: no person's seat names an oidc_subject or email, so every token from the issuer would be refused; " +
			"set one on the seats of the people who sign in")
	}
}

// issuerProblem says why an issuer URL cannot be used, or nothing. Tokens
// are bearer credentials, so the provider is reached over HTTPS; plain HTTP
// only on this machine, where a test or a local provider runs.
func issuerProblem(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Sprintf("%q is not an absolute http(s) URL", issuer)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("%q has a query or fragment; an issuer URL has neither", issuer)
	}
	if u.Scheme == "http" && !loopbackName(u.Hostname()) {
		return fmt.Sprintf("%q is plain HTTP to another machine; an identity provider is reached over HTTPS (http only on loopback)", issuer)
	}
	return ""
}

func loopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
