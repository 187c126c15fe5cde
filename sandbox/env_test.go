package sandbox

import (
	"slices"
	"testing"
)

// ENV-1: a box's environment is exactly the host allowlist and what the
// run's configuration names, with the box's own home and temporary
// directory — never the hub's own variables, nor the host's locations.
func TestEnvIsTheAllowlistAndWhatTheRunNames(t *testing.T) {
	host := []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/root", "TMPDIR=/var/tmp", "XDG_CONFIG_HOME=/root/.config",
		"CREWLET_OPERATOR_TOKEN=tok", "OPENAI_API_KEY=sk-hub", "DOCKER_HOST=unix:///run/docker.sock", "HTTPS_PROXY=http://proxy:3128"}
	got := Env(host, map[string]string{"GOFLAGS": "-mod=mod", "TMPDIR": "/workspace/tmp"})
	want := []string{"GOFLAGS=-mod=mod", "HOME=" + Home, "HTTPS_PROXY=http://proxy:3128", "LANG=C.UTF-8", "LOGNAME=box",
		"PATH=/usr/bin:/bin", "TMPDIR=/workspace/tmp", "USER=box"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
