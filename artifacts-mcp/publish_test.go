package artifacts

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state/statetest"
)

// ART-7: two writers publish on one base; the second is refused
// stale_version with the live version, who published it and when, the
// paths changed since its base and the first page of each changed text
// file fenced as its author's. There is no force.
func TestStalePublish(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Site", "<p>one</p>")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "contributor"})
	h.OK(ada, "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "<p>ada's two</p>",
		"files": map[string]any{"data.csv": map[string]any{"content": "a,b\n"}}})
	r := h.Refused(grace, "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "<p>grace's two</p>"}, authority.StaleVersion)
	mustContain(t, r.Sentence, "version 2, published by @ada", "not 1", "data.csv, index.html")
	if num(r.Data["version"]) != 2 || r.Data["published_by"] != "ada" || r.Data["published_at"] == nil || r.Data["live_files_withheld"] != nil {
		t.Fatalf("stale data %v", r.Data)
	}
	files := asList(r.Data["live_files"])
	if len(files) != 2 {
		t.Fatalf("live files %v", files)
	}
	page := asMap(files[1])
	if page["path"] != "index.html" || servers.Unfence(page["text"].(string)) != "<p>ada's two</p>" {
		t.Fatalf("live page %v", page)
	}
	mustContain(t, page["text"].(string), "@ada (human)")
	h.Refused(grace, "publish_artifact", map[string]any{"id": id, "base_version": 2, "content": "x", "force": true}, authority.Invalid)
	if out := h.OK(grace, "publish_artifact", map[string]any{"id": id, "base_version": 2, "content": "<p>grace's three</p>"}); num(out["version"]) != 3 {
		t.Fatalf("publish on the live version %v", out)
	}

	// An agent's own artifact, edited for somebody it is not shared with:
	// the refusal carries the numbers, the author and the paths alone.
	own := h.create(turn(alan, "t0", "alan"), "Alan's", "<p>a</p>")
	h.OK(turn(alan, "t1", "alan"), "publish_artifact", map[string]any{"id": own, "base_version": 1, "content": "<p>secret b</p>"})
	w := h.Refused(turn(alan, "t2", "grace"), "publish_artifact", map[string]any{"id": own, "base_version": 1, "content": "<p>c</p>"}, authority.StaleVersion)
	if w.Data["live_files_withheld"] != true || w.Data["live_files"] != nil || num(w.Data["version"]) != 2 || strings.Contains(fmt.Sprint(w), "secret") {
		t.Fatalf("withheld %v", w)
	}
	mustContain(t, w.Sentence, "withheld", "index.html")
}

// ART-7, ART-8: edits, removal by null, restore_version, and the bounds.
func TestPublishModes(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Doc", "alpha beta beta\n")
	h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 1, "edits": []any{map[string]any{"old_str": "gamma", "new_str": "x"}}}, authority.Invalid)
	r := h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 1, "edits": []any{map[string]any{"old_str": "beta", "new_str": "x"}}}, authority.Invalid)
	mustContain(t, r.Sentence, "occurs 2 times")
	h.OK(ada, "publish_artifact", map[string]any{"id": id, "base_version": 1, "edits": []any{
		map[string]any{"old_str": "alpha", "new_str": "ALPHA"}, map[string]any{"old_str": "beta beta", "new_str": "beta"}},
	})
	v2 := h.OK(ada, "get_artifact", map[string]any{"id": id})
	if servers.Unfence(asMap(v2["file"])["text"].(string)) != "ALPHA beta\n" {
		t.Fatalf("edited %v", v2["file"])
	}
	h.OK(ada, "publish_artifact", map[string]any{"id": id, "base_version": 2, "files": map[string]any{"extra.txt": map[string]any{"content": "e"}}})
	out := h.OK(ada, "publish_artifact", map[string]any{"id": id, "base_version": 3, "files": map[string]any{"extra.txt": nil}})
	if fmt.Sprint(out["changed"]) != "[extra.txt]" {
		t.Fatalf("removal %v", out)
	}
	back := h.OK(ada, "publish_artifact", map[string]any{"id": id, "base_version": 4, "restore_version": 1, "label": "back to one"})
	if num(back["version"]) != 5 {
		t.Fatalf("restore %v", back)
	}
	g := h.OK(ada, "get_artifact", map[string]any{"id": id, "versions": 1})
	if servers.Unfence(asMap(g["file"])["text"].(string)) != "alpha beta beta\n" || num(asMap(asList(g["versions"])[0])["restored_from"]) != 1 || num(g["versions_omitted"]) != 4 {
		t.Fatalf("restored %v", g)
	}
	// Bounds: more than 1 MiB inline, two modes at once, a path under the
	// asset store, a version that is none.
	big := strings.Repeat("x", 600<<10)
	r = h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 5, "files": map[string]any{"a.txt": map[string]any{"content": big}, "b.txt": map[string]any{"content": big}}}, authority.Invalid)
	mustContain(t, r.Sentence, "1048576")
	h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 5, "content": "x", "restore_version": 1}, authority.Invalid)
	h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 5, "files": map[string]any{"assets/x.png": map[string]any{"content": "x"}}}, authority.Invalid)
	h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 5, "restore_version": 9}, authority.Invalid)
	h.Refused(ada, "publish_artifact", map[string]any{"id": id, "base_version": 5, "source": map[string]any{"sandbox": "dist/"}}, authority.Unavailable)
}

// ART-8: per turn 20 publishes, 10 on one artifact, 128 MiB; past them
// turn_quota. A person's calls carry no turn and no quota.
func TestTurnQuota(t *testing.T) {
	h := newHarness(t)
	c := turn(alan, "quota-turn", "alan")
	a := h.create(c, "A", "0")
	for v := 1; v < 10; v++ {
		h.OK(c, "publish_artifact", map[string]any{"id": a, "base_version": v, "content": fmt.Sprint(v)})
	}
	r := h.Refused(c, "publish_artifact", map[string]any{"id": a, "base_version": 10, "content": "10"}, authority.TurnQuota)
	mustContain(t, r.Sentence, "10 versions of "+a, "Stop here and report")
	b := h.create(c, "B", "0")
	for v := 1; v < 10; v++ {
		h.OK(c, "publish_artifact", map[string]any{"id": b, "base_version": v, "content": fmt.Sprint(v)})
	}
	r = h.Refused(c, "create_artifact", map[string]any{"kind": "doc", "title": "C"}, authority.TurnQuota)
	mustContain(t, r.Sentence, "20 versions")
	// Another turn starts afresh.
	h.OK(turn(alan, "next-turn", "alan"), "publish_artifact", map[string]any{"id": a, "base_version": 10, "content": "10"})
	h.OK(turn(alan, "share-turn", "alan"), "share_artifact", map[string]any{"id": a, "to": "ada", "role": "contributor"})
	for v := 11; v < 14; v++ {
		h.OK(ada, "publish_artifact", map[string]any{"id": a, "base_version": v, "content": fmt.Sprint(v)})
	}
	// Bytes: 128 MiB a turn, counted from what was put.
	bytesTurn := turn(alan, "bytes-turn", "alan")
	big := h.create(bytesTurn, "Big", "0")
	h.Refused(ada, "upload_artifact_asset", map[string]any{"id": big, "path": "x.png", "base64": "AA=="}, authority.NotFound)
	setQuota(t, h, "bytes-turn", turnQuota{Publishes: 1, Bytes: maxTurnBytes - 10})
	r = h.Refused(bytesTurn, "publish_artifact", map[string]any{"id": big, "base_version": 1, "content": strings.Repeat("y", 11)}, authority.TurnQuota)
	mustContain(t, r.Sentence, "128 MiB")
	h.OK(bytesTurn, "publish_artifact", map[string]any{"id": big, "base_version": 1, "content": strings.Repeat("y", 10)})
}

// WR-1, WR-2, WR-5 for a publish: a lost acknowledgement answers unknown
// with no version; the seat's same call again lands once.
func TestPublishWriteContract(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Site", "1")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "alan", "role": "contributor"})
	h.log.Set(func(f *statetest.Faults) { f.DropAcks = 1 })
	args := map[string]any{"id": id, "base_version": 1, "content": "2"}
	r := h.Refused(alan, "publish_artifact", args, authority.Unavailable)
	mustContain(t, r.Sentence, "may or may not have landed", "exactly the same publish_artifact call")
	if r.Data["outcome"] != "unknown" || r.Data["version"] != nil {
		t.Fatalf("unknown %v", r.Data)
	}
	again := h.OK(alan, "publish_artifact", args)
	if again["outcome"] != "applied" || num(again["version"]) != 2 {
		t.Fatalf("the repeat %v", again)
	}
	if head := num(asMap(h.OK(ada, "get_artifact", map[string]any{"id": id})["artifact"])["head"]); head != 2 {
		t.Fatalf("head %d after one publish answered twice", head)
	}
}

// ART-1: assets, for an artifact that declares the capability.
func TestAssets(t *testing.T) {
	h := newHarness(t)
	plain := h.create(ada, "Plain", "x")
	h.Refused(ada, "upload_artifact_asset", map[string]any{"id": plain, "path": "logo.png", "base64": "iVBORw=="}, authority.Invalid)
	id := h.OK(ada, "create_artifact", map[string]any{"kind": "html", "title": "With assets", "assets": true, "content": `<img src="assets/logo.png">`})["id"].(string)
	png := []byte("\x89PNG\r\n\x1a\nfake")
	out := h.OK(ada, "upload_artifact_asset", map[string]any{"id": id, "path": "logo.png", "base64": base64.StdEncoding.EncodeToString(png)})
	if out["ref"] != "assets/logo.png" || out["url"] != "http://hub.test/artifacts/"+id+"/assets/logo.png" {
		t.Fatalf("asset %v", out)
	}
	f, err := h.store.Open(t.Context(), ada, id, "assets/logo.png")
	if err != nil || string(f.Data) != string(png) || f.Type != "image/png" {
		t.Fatalf("open %v %q %v", err, f.Data, f.Type)
	}
	h.Refused(ada, "upload_artifact_asset", map[string]any{"id": id, "path": "app.js", "content": "alert(1)"}, authority.Invalid)
	h.Refused(grace, "upload_artifact_asset", map[string]any{"id": id, "path": "x.png", "base64": "AA=="}, authority.NotFound)
}
