package e2e_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/crewlet/hub"

// TestImportDirection enforces the layering: authority imports nothing of
// ours; the servers kit only authority; first-party servers and the agent
// runtime never the hub. The hub may import all of them; cmd wires.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	ours := func(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }
	under := func(p, dir string) bool { r := rel(p); return r == dir || strings.HasPrefix(r, dir+"/") }
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if !ours(imp) {
				continue
			}
			checked++
			switch {
			case under(pkg, "authority"):
				t.Errorf("%s imports %s: authority imports nothing of ours", rel(pkg), rel(imp))
			case under(pkg, "servers") && !under(imp, "authority") && !under(imp, "servers"):
				t.Errorf("%s imports %s: the servers kit imports only authority", rel(pkg), rel(imp))
			case (under(pkg, "tracker-mcp") || under(pkg, "knowledge-mcp") || under(pkg, "artifacts-mcp") || under(pkg, "agent-runtime")) && under(imp, "hub"):
				t.Errorf("%s imports %s: a first-party server never imports the hub", rel(pkg), rel(imp))
			case !under(pkg, "cmd") && under(imp, "cmd"):
				t.Errorf("%s imports %s: nothing imports cmd", rel(pkg), rel(imp))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no in-module import was checked; go list output changed shape")
	}
}

// TestLayout keeps the required top level in place.
func TestLayout(t *testing.T) {
	for _, dir := range []string{"hub", "servers", "tracker-mcp", "knowledge-mcp", "artifacts-mcp", "agent-runtime", "authority", "cmd", "e2e"} {
		if out, err := exec.Command("go", "list", module+"/"+dir+"/...").CombinedOutput(); err != nil && dir != "e2e" {
			t.Errorf("%s: %v %s", dir, err, out)
		}
	}
}
