package launch

import (
	"os"
	"strings"
	"testing"
)

type childEnvFile struct {
	Cases []struct {
		Name    string            `json:"name"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		Host    []string          `json:"host"`
		Want    []string          `json:"want"`
	} `json:"cases"`
}

// TestChildEnv covers ENV-1 (and ENV-2's empty literal) from
// testdata/childenv.json: the child's environment is exactly the expected
// list, in order, and nothing planted in the host leaks.
func TestChildEnv(t *testing.T) {
	var f childEnvFile
	loadCases(t, "childenv.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			r := Resolved{Name: "s", Transport: TransportStdio, Command: c.Command, Args: c.Args, Env: c.Env}
			got := ChildEnv(r, c.Host)
			if !sameList(got, c.Want) {
				t.Errorf("got  %q\nwant %q", got, c.Want)
			}
			for _, kv := range got {
				if strings.Contains(kv, "planted") {
					t.Errorf("a planted host variable leaked: %s", kv)
				}
			}
		})
	}
}

// TestChildEnvRealHost runs against this process's own environment with a
// planted secret, the way the hub calls it (ENV-1).
func TestChildEnvRealHost(t *testing.T) {
	t.Setenv("CREWLET_SECRET", "planted-real")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "planted-real")
	t.Setenv("DOCKER_HOST", "unix:///planted-real.sock")
	for _, kv := range ChildEnv(Resolved{Transport: TransportStdio, Command: "npx"}, os.Environ()) {
		k, _, _ := strings.Cut(kv, "=")
		if !hostAllowlist[k] && !userLocations[k] {
			t.Errorf("%s is not allowlisted but was passed", k)
		}
	}
	found := false
	for _, kv := range ChildEnv(Resolved{Transport: TransportStdio, Command: "docker"}, os.Environ()) {
		if kv == "DOCKER_HOST=unix:///planted-real.sock" {
			found = true
		}
		if strings.HasPrefix(kv, "CREWLET_SECRET=") || strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
			t.Errorf("leaked %s", kv)
		}
	}
	if !found {
		t.Error("docker did not get DOCKER_HOST")
	}
}
