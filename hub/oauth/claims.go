package oauth

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// accessTokenTypes are the JOSE "typ" values an access token is taken
// with. RFC 9068 asks for at+jwt (or application/at+jwt); the plain JWT,
// or no typ at all, is what Zitadel, Keycloak, Entra ID and Auth0 write
// on theirs by default, so refusing it would refuse most providers. Any
// other type names another kind of token (a logout token, a DPoP proof, a
// security event) that the provider signed for another purpose.
var accessTokenTypes = map[string]bool{"": true, "at+jwt": true, "application/at+jwt": true, "jwt": true, "application/jwt": true}

// accessTokenHeader reads the token's protected header: its key id, and a
// refusal for a type that is not an access token's.
func accessTokenHeader(raw string) (string, *Refusal) {
	head, _, ok := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	var h struct {
		Typ string `json:"typ"`
		Kid string `json:"kid"`
	}
	if !ok || err != nil || json.Unmarshal(b, &h) != nil {
		// Not a JWT at all: the signature check says so, in its words.
		return "", nil
	}
	if !accessTokenTypes[strings.ToLower(h.Typ)] {
		return "", &Refusal{http.StatusUnauthorized, "invalid_token",
			fmt.Sprintf("the token's type is %q, not an access token's (at+jwt, RFC 9068); send the access token the provider issued", clipClaim(h.Typ))}
	}
	return h.Kid, nil
}

// timely refuses a token the provider says is not valid yet, or says it
// issued in the future, beyond ClockSkew: go-oidc allows five minutes
// ahead on nbf and does not read iat.
func timely(now, issued time.Time, nbf json.Number) *Refusal {
	if nbf != "" {
		f, err := nbf.Float64()
		if err != nil {
			return &Refusal{http.StatusUnauthorized, "invalid_token", "the token's nbf is not a number"}
		}
		if at := time.Unix(int64(f), 0); at.After(now.Add(ClockSkew)) {
			return &Refusal{http.StatusUnauthorized, "invalid_token",
				fmt.Sprintf("the token is not valid before %s; the provider's clock or this hub's is wrong by more than %s", at.UTC().Format(time.RFC3339), ClockSkew)}
		}
	}
	if !issued.IsZero() && issued.After(now.Add(ClockSkew)) {
		return &Refusal{http.StatusUnauthorized, "invalid_token",
			fmt.Sprintf("the token says it was issued at %s, in the future; the provider's clock or this hub's is wrong by more than %s", issued.UTC().Format(time.RFC3339), ClockSkew)}
	}
	return nil
}

// foldEmail is how e-mails are compared: ASCII letters fold to lower case
// and nothing else folds. strings.ToLower folds the Kelvin sign (U+212A)
// to k, so a provider that lets a person write "\u212aate@example.com"
// would have mapped them to kate@example.com's seat.
func foldEmail(e string) string {
	b := []byte(e)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// clipClaim bounds a claim quoted in a refusal; a token is the sender's
// to write.
func clipClaim(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
