package launch

import (
	"path/filepath"
	"strings"
)

// hostAllowlist is the minimum for an ordinary program to work: the search
// path, locale, terminal, time zone, TLS trust and proxies. The engine hands
// the same list to every child process it starts.
var hostAllowlist = map[string]bool{
	"PATH": true,
	"LANG": true, "LANGUAGE": true, "LC_ALL": true, "LC_CTYPE": true, "LC_NUMERIC": true,
	"TERM": true, "TZ": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "REQUESTS_CA_BUNDLE": true,
	"CURL_CA_BUNDLE": true, "NODE_EXTRA_CA_CERTS": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "all_proxy": true, "no_proxy": true,
}

// userLocations lets a package runner (npx, uvx) find the engine user's home
// and caches, since the child runs as that user.
var userLocations = map[string]bool{
	"HOME": true, "USER": true, "LOGNAME": true, "TMPDIR": true,
	"XDG_CONFIG_HOME": true, "XDG_CACHE_HOME": true, "XDG_DATA_HOME": true,
	"XDG_STATE_HOME": true, "XDG_RUNTIME_DIR": true,
}

// runtimeExact and runtimePrefixes are a container runtime CLI's own
// settings. A server published as an image runs the docker or podman CLI,
// and a rootless setup locates its daemon through DOCKER_HOST and friends;
// withheld, the CLI falls back to the system socket and fails with a
// permission error that points nowhere useful.
var (
	runtimeExact    = map[string]bool{"REGISTRY_AUTH_FILE": true, "DBUS_SESSION_BUS_ADDRESS": true}
	runtimePrefixes = []string{"DOCKER_", "CONTAINER_", "CONTAINERS_", "PODMAN_"}
)

// isContainerRuntime reports whether a command is the docker or podman CLI,
// by its base name so /usr/bin/docker counts too.
func isContainerRuntime(command string) bool {
	switch filepath.Base(command) {
	case "docker", "podman":
		return true
	}
	return false
}

// ChildEnv is the complete environment a stdio child is started with, as
// KEY=VALUE entries sorted by key. host is the engine's own environment
// (os.Environ()); only the allowlisted variables are taken from it — plus a
// container runtime's own settings when the command is docker or podman —
// and r.Env, already merged from server, unit and seat, is laid over them.
// Nothing else from the host is ever passed: the engine's environment holds
// its signing keys and operator tokens, and code pulled from a package
// registry must not be handed them just because it was started here.
func ChildEnv(r Resolved, host []string) []string {
	runtime := isContainerRuntime(r.Command)
	env := map[string]string{}
	for _, kv := range host {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if hostAllowlist[k] || userLocations[k] || (runtime && runtimeVar(k)) {
			env[k] = v
		}
	}
	for k, v := range r.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func runtimeVar(k string) bool {
	if runtimeExact[k] {
		return true
	}
	for _, p := range runtimePrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
