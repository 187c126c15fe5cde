package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/sandbox"
	"github.com/crewlet/hub/servers/state"
)

// turnBuilds is the engine's side of source.sandbox as a test holds it:
// one turn's coding run and its real box.
type turnBuilds struct {
	turn string
	box  *sandbox.Box
}

func (b turnBuilds) Build(c authority.Caller) BuildBox {
	if c.Kind != authority.KindAgent || c.TurnKey != b.turn {
		return nil
	}
	return b.box
}

// openBuildBox makes a real bubblewrap box and runs script in it.
func openBuildBox(t *testing.T, script string) *sandbox.Box {
	t.Helper()
	box, err := sandbox.Open(t.Context(), sandbox.Config{}, t.TempDir(), sandbox.Env(os.Environ(), nil))
	if err != nil {
		t.Fatalf("source.sandbox needs bubblewrap: %v", err)
	}
	t.Cleanup(func() { _ = box.Close() })
	res, err := box.Run(t.Context(), []string{"sh", "-c", script}, nil)
	if err != nil || res.Exit != 0 {
		t.Fatalf("building in the box: %+v %v", res, err)
	}
	return box
}

// ART-8, issue 38: source.sandbox publishes the build directory of the
// turn's coding run, read through its real box: every file at its path
// under the directory, byte for byte, each carrying its digest, on
// create_artifact and on publish_artifact. Another turn has no build to
// publish.
func TestSandboxBuildPublished(t *testing.T) {
	box := openBuildBox(t, `mkdir -p dist/css && printf '<h1>built in the box</h1>\n' > dist/index.html &&
		printf 'h1{color:red}' > dist/css/site.css && printf '\000\001\377binary' > dist/logo.bin && echo outside > notes.txt`)
	h := newHarness(t, func(_ *state.Options, d *Deps) { d.Builds = turnBuilds{turn: alan.TurnKey, box: box} })
	out := h.OK(alan, "create_artifact", map[string]any{"kind": "html", "title": "Built", "source": map[string]any{"sandbox": "dist/"}})
	id := out["id"].(string)
	want := map[string]string{"index.html": "<h1>built in the box</h1>\n", "css/site.css": "h1{color:red}", "logo.bin": "\x00\x01\xffbinary"}
	files := asList(h.OK(ada, "get_artifact", map[string]any{"id": id})["files"])
	if len(files) != len(want) {
		t.Fatalf("the version holds %v", files)
	}
	for _, f := range files {
		f := asMap(f)
		p := f["path"].(string)
		sum := sha256.Sum256([]byte(want[p]))
		if f["digest"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s carries digest %v", p, f["digest"])
		}
		file, err := h.store.Open(context.Background(), ada, id, p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(file.Data, []byte(want[p])) {
			t.Fatalf("%s reads back as %q", p, file.Data)
		}
	}
	if _, err := box.Run(t.Context(), []string{"sh", "-c", "printf '<h1>rebuilt</h1>' > dist/index.html"}, nil); err != nil {
		t.Fatal(err)
	}
	if v := h.OK(alan, "publish_artifact", map[string]any{"id": id, "base_version": 1, "source": map[string]any{"sandbox": "/workspace/dist"}}); num(v["version"]) != 2 {
		t.Fatalf("the publish: %v", v)
	}
	if file, err := h.store.Open(context.Background(), ada, id, "index.html"); err != nil || string(file.Data) != "<h1>rebuilt</h1>" {
		t.Fatalf("the republished index: %q %v", file.Data, err)
	}
	r := h.Refused(turn(alan, "turn-a2", "ada"), "create_artifact", map[string]any{"kind": "html", "title": "No run", "source": map[string]any{"sandbox": "dist/"}}, authority.Invalid)
	mustContain(t, r.Sentence, "run_sandbox first")
}

// Escapes refused, each through a real box: a link to /etc/shadow in the
// build (the whole build refused, nothing published), a directory leaving
// the workspace, and one file more than a version holds (never
// truncated).
func TestSandboxBuildEscapesRefused(t *testing.T) {
	box := openBuildBox(t, `mkdir -p link full ok && printf x > link/index.html && ln -s /etc/shadow link/shadow.txt &&
		i=0; while [ $i -le 1000 ]; do : > full/f$i.txt; i=$((i+1)); done; printf y > ok/index.html`)
	h := newHarness(t, func(_ *state.Options, d *Deps) { d.Builds = turnBuilds{turn: alan.TurnKey, box: box} })
	create := func(dir string) map[string]any {
		return map[string]any{"kind": "html", "title": "Escape", "source": map[string]any{"sandbox": dir}}
	}
	r := h.Refused(alan, "create_artifact", create("link/"), authority.Invalid)
	mustContain(t, r.Sentence, "shadow.txt", "symbolic link")
	r = h.Refused(alan, "create_artifact", create("../"), authority.Invalid)
	mustContain(t, r.Sentence, "workspace")
	r = h.Refused(alan, "create_artifact", create("/etc"), authority.Invalid)
	mustContain(t, r.Sentence, "outside the workspace")
	r = h.Refused(alan, "create_artifact", create("full/"), authority.Invalid)
	mustContain(t, r.Sentence, "1001 files", "at most 1000")
	if list := asList(h.OK(ada, "list_artifacts", map[string]any{})["artifacts"]); len(list) != 0 {
		t.Fatalf("a refused build published %v", list)
	}
	h.OK(alan, "create_artifact", create("ok/"))
	if list := asList(h.OK(ada, "list_artifacts", map[string]any{})["artifacts"]); len(list) != 1 {
		t.Fatalf("the build that holds is listed as %v", list)
	}
}
