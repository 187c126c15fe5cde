package upstream

import (
	"net/url"
	"strings"
)

// scrub takes what the server is started with out of a message before it
// is logged, kept as a cause or answered to a caller: Go's HTTP errors quote
// the URL they dialled, and a URL, like a header or an environment value,
// may carry a credential the configuration kept behind a ${VAR}.
func (i *Instance) scrub(msg string) string {
	spec := i.opts.Spec
	if spec.URL != "" {
		msg = strings.ReplaceAll(msg, spec.URL, "the url of "+spec.Name)
		if u, err := url.Parse(spec.URL); err == nil {
			// Go's HTTP client quotes a URL with its password hidden,
			// which the line above does not find.
			msg = strings.ReplaceAll(msg, u.Redacted(), "the url of "+spec.Name)
			if u.RawQuery != "" {
				msg = strings.ReplaceAll(msg, u.RawQuery, "[REDACTED]")
			}
		}
	}
	for _, m := range []map[string]string{spec.Headers, spec.Env} {
		for _, v := range m {
			if len(v) >= 8 {
				msg = strings.ReplaceAll(msg, v, "[REDACTED]")
			}
		}
	}
	// Whatever URL is still quoted (a redirect, a proxy) shows no
	// userinfo or query values either.
	return MaskURLs(msg)
}
