package sandbox

import (
	"sort"
	"strings"

	"github.com/crewlet/hub/servers/upstream/launch"
)

// Env is the environment of everything run in a box: the host allowlist
// every child of the engine gets (ENV-1, launch.ChildEnv: the search path,
// locale, terminal, time zone, TLS trust and proxies) and named, the
// variables the run's configuration names, already resolved — never the
// engine's own environment. The user locations a host child is given are
// the box's own instead: its home and /tmp, since the host's do not exist
// inside and must not be named to it.
func Env(host []string, named map[string]string) []string {
	child := launch.ChildEnv(launch.Resolved{Command: "bwrap", Env: named}, host)
	out := make([]string, 0, len(child)+3)
	for _, kv := range child {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := boxLocations[k]; ours && named[k] == "" {
			continue
		}
		if strings.HasPrefix(k, "XDG_") && named[k] == "" {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range boxLocations {
		if _, set := named[k]; !set {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// boxLocations are the user locations as a box has them.
var boxLocations = map[string]string{"HOME": Home, "TMPDIR": "/tmp", "USER": "box", "LOGNAME": "box"}
