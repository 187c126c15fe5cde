package artifacts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state/statetest"
)

// ART-8, Build 2: a 50 MiB build streamed from a project's directory into
// a version, file by file, each read back against its digest before the
// version is decided, and served back by digest; a chunk that reads back
// corrupted refuses the publish and decides nothing; after a purge no byte
// of the build is anywhere under the node's data directory.
func TestFiftyMiBBuildStreamedVerifiedAndPurged(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes and greps 100 MiB")
	}
	h := newHarness(t)
	trk := h.tracker()
	start := time.Now()
	phase := func(what string) {
		t.Logf("%-28s %v", what, time.Since(start).Round(time.Millisecond))
		start = time.Now()
	}
	const files, size = 50, 1 << 20
	digests := map[string]string{}
	var markers []string
	for i := range files {
		marker := fmt.Sprintf("PLANTED-build-%02d-%s", i, rand.Text()[:12])
		markers = append(markers, marker)
		data := make([]byte, size)
		_, _ = rand.Read(data)
		copy(data, marker)
		copy(data[size/2:], marker) // in the middle too, across a chunk boundary's neighbourhood
		p := fmt.Sprintf("dist/assets-%02d.bin", i)
		if i == 0 {
			p = "dist/index.html"
		}
		sum := sha256.Sum256(data)
		digests[strings.TrimPrefix(p, "dist/")] = hex.EncodeToString(sum[:])
		trk.OK(ada, "write_project_file", map[string]any{"project": "CORE", "path": p, "base64": base64.StdEncoding.EncodeToString(data)})
	}
	phase("50 project files written")
	out := h.OK(ada, "create_artifact", map[string]any{"kind": "html", "title": "Build", "source": map[string]any{"project": "CORE", "path": "dist/"}})
	id := out["id"].(string)
	g := h.OK(ada, "get_artifact", map[string]any{"id": id})
	if fs := asList(g["files"]); len(fs) != files {
		t.Fatalf("the version holds %d files, want %d", len(fs), files)
	}
	for _, f := range asList(g["files"]) {
		f := asMap(f)
		if digests[f["path"].(string)] != f["digest"] || num(f["size"]) != size {
			t.Fatalf("file %v does not carry the digest it was built with", f)
		}
	}
	for p, want := range digests {
		file, err := h.store.Open(context.Background(), ada, id, p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(file.Data)
		if hex.EncodeToString(sum[:]) != want {
			t.Fatalf("%s reads back as another file", p)
		}
	}

	phase("built and read back")
	// A chunk that reads back corrupted — the 7th file this publish puts,
	// or a project file it streams — refuses the publish; nothing is
	// decided, and the same call lands once the store reads true again.
	args := map[string]any{"id": id, "base_version": 1, "source": map[string]any{"project": "CORE", "path": "dist/"}, "label": "rebuild"}
	for _, pick := range []func(string) bool{
		func(name string) bool { return strings.HasSuffix(name, ".7") },
		func(name string) bool {
			return !strings.Contains(name, ".1") && strings.HasPrefix(name, "op_") && strings.Count(name, ".") == 1 && len(name) > 40
		},
	} {
		h.log.Blobs().Corrupt(pick)
		h.Refused(ada, "publish_artifact", args, authority.InternalError)
		h.log.Blobs().Corrupt(nil)
		if head := num(asMap(h.OK(ada, "get_artifact", map[string]any{"id": id})["artifact"])["head"]); head != 1 {
			t.Fatalf("a refused publish moved the head to %d", head)
		}
	}
	if v := h.OK(ada, "publish_artifact", args); num(v["version"]) != 2 {
		t.Fatalf("the clean publish %v", v)
	}

	phase("corrupted and republished")
	// The project's copies go; the artifact's are the only ones left...
	for p := range digests {
		trk.OK(ada, "remove_project_file", map[string]any{"project": "CORE", "path": "dist/" + p})
	}
	if hits := statetest.Grep(t, h.dir, markers[3]); len(hits) == 0 {
		t.Fatal("the build is not under the data directory at all; the purge would prove nothing")
	}
	phase("project files removed")
	// ...until the artifact is purged: then no byte of it is anywhere.
	ctx := context.Background()
	if err := h.store.Trash(ctx, ada, id); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Purge(ctx, ada, id, ""); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{markers[0], markers[3], markers[49]} {
		if hits := statetest.Grep(t, h.dir, m); len(hits) != 0 {
			t.Fatalf("%s is still stored after the purge: %v", m, hits)
		}
	}
	phase("purged and grepped")
	h.Refused(ada, "get_artifact", map[string]any{"id": id}, authority.NotFound)
}
