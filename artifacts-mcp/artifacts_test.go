package artifacts

import (
	"context"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state/statetest"
)

// ART-1: create, read, list, update; the person who asked an agent for an
// artifact is made its editor; every answer carries the url.
func TestCreateGetListUpdate(t *testing.T) {
	h := newHarness(t)
	out := h.OK(alan, "create_artifact", map[string]any{"kind": "html", "title": "Launch plan", "description": "for the launch",
		"content": "<h1>Plan</h1>\n", "files": map[string]any{"css/site.css": map[string]any{"content": "h1{}"}}})
	id := out["id"].(string)
	if out["outcome"] != "applied" || num(out["version"]) != 1 || out["url"] != "http://hub.test/artifacts/"+id+"/" || out["role"] != "owner" {
		t.Fatalf("create answered %v", out)
	}
	// ada asked alan for it, so she is its editor: she may publish.
	g := h.OK(ada, "get_artifact", map[string]any{"id": id})
	if g["role"] != "editor" || g["writer"] != true {
		t.Fatalf("ada's role %v writer %v", g["role"], g["writer"])
	}
	art := asMap(g["artifact"])
	if num(art["head"]) != 1 || art["owner"] != "alan" || art["url"] != out["url"] || art["main"] != "index.html" {
		t.Fatalf("artifact %v", art)
	}
	mustContain(t, art["title"].(string), "Launch plan", "<<<untrusted", "@alan (agent)")
	file := asMap(g["file"])
	if file["path"] != "index.html" || servers.Unfence(file["text"].(string)) != "<h1>Plan</h1>\n" {
		t.Fatalf("file %v", file)
	}
	mustContain(t, file["text"].(string), "@alan (agent)") // another principal's text is fenced
	if files := asList(g["files"]); len(files) != 2 || asMap(files[0])["path"] != "css/site.css" {
		t.Fatalf("files %v", files)
	}
	if len(asList(g["history"])) == 0 || len(asList(g["shares"])) != 1 {
		t.Fatalf("an editor sees history and shares: %v", g)
	}
	// Another person with no relation is told it does not exist, in the
	// words of an id nothing holds (ART-2).
	none := h.Refused(grace, "get_artifact", map[string]any{"id": id}, authority.NotFound)
	missing := h.Refused(grace, "get_artifact", map[string]any{"id": "art_ffff"}, authority.NotFound)
	if none.Sentence != strings.Replace(missing.Sentence, "art_ffff", id, 1) {
		t.Fatalf("no relation: %q; missing id: %q", none.Sentence, missing.Sentence)
	}

	h.create(grace, "Ops board", "<p>ops</p>")
	mine := asList(h.OK(ada, "list_artifacts", map[string]any{"scope": "mine"})["artifacts"])
	shared := asList(h.OK(ada, "list_artifacts", map[string]any{"scope": "shared"})["artifacts"])
	agents := asList(h.OK(ada, "list_artifacts", map[string]any{"scope": "agents", "query": "LAUNCH"})["artifacts"])
	if len(mine) != 0 || len(shared) != 1 || len(agents) != 1 || asMap(shared[0])["role"] != "editor" {
		t.Fatalf("mine %v shared %v agents %v", mine, shared, agents)
	}
	if all := asList(h.OK(grace, "list_artifacts", map[string]any{})["artifacts"]); len(all) != 1 {
		t.Fatalf("grace lists %v", all)
	}
	// Shared with everybody is the company scope, not shared with her.
	h.OK(turn(alan, "t-share", "alan"), "share_artifact", map[string]any{"id": id, "to": "company"})
	if l := asList(h.OK(grace, "list_artifacts", map[string]any{"scope": "shared"})["artifacts"]); len(l) != 0 {
		t.Fatalf("grace's shared scope %v", l)
	}
	if l := asList(h.OK(grace, "list_artifacts", map[string]any{"scope": "company", "kind": "html"})["artifacts"]); len(l) != 1 || asMap(l[0])["role"] != "viewer" {
		t.Fatalf("grace's company scope %v", l)
	}
	h.Refused(ada, "list_artifacts", map[string]any{"scope": "everything"}, authority.Invalid)

	up := h.OK(ada, "update_artifact", map[string]any{"id": id, "title": "Launch plan v2", "version": 1, "label": "first cut"})
	if up["outcome"] != "applied" || len(asList(up["changed"])) != 2 {
		t.Fatalf("update %v", up)
	}
	vs := asList(h.OK(ada, "get_artifact", map[string]any{"id": id})["versions"])
	if asMap(vs[0])["label"] != "first cut" {
		t.Fatalf("versions %v", vs)
	}
	h.Refused(ada, "update_artifact", map[string]any{"id": id, "label": "x"}, authority.Invalid)
	h.Refused(ada, "create_artifact", map[string]any{"kind": "video", "title": "x"}, authority.Invalid)
	h.Refused(ada, "create_artifact", map[string]any{"kind": "doc", "title": "two\nlines"}, authority.Invalid)
}

// ART-2 through the tools: shares to a seat, a unit (reaching the units
// beneath it) and the company, the owner's alone, up to editor; the agent
// cap and agents_manage_others; a turn for an unknown requester opens
// nothing.
func TestSharesAndTheCeiling(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Roadmap", "<p>road</p>")
	h.Refused(bob, "get_artifact", map[string]any{"id": id}, authority.NotFound)
	sh := h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "unit:core", "role": "contributor"})
	if len(asList(sh["shares"])) != 1 || sh["url"] == nil {
		t.Fatalf("share %v", sh)
	}
	// bob sits in web, beneath core.
	if g := h.OK(bob, "get_artifact", map[string]any{"id": id}); g["role"] != "contributor" || g["writer"] != true {
		t.Fatalf("bob %v", g["role"])
	}
	h.Refused(bob, "share_artifact", map[string]any{"id": id, "to": "grace"}, authority.Forbidden)
	h.Refused(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "owner"}, authority.Invalid)
	h.Refused(ada, "share_artifact", map[string]any{"id": id, "to": "nobody"}, authority.Invalid)
	h.Refused(ada, "share_artifact", map[string]any{"id": id, "to": "unit:nowhere"}, authority.Invalid)
	same := h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "unit:core", "role": "contributor"})
	if same["outcome"] != "unchanged" {
		t.Fatalf("sharing the same role again answered %v", same)
	}

	// alan (an agent of core, acting for ada) is a contributor through the
	// unit share: he publishes; made editor, he is still held to
	// contributor on an artifact he does not own.
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "alan", "role": "editor"})
	h.OK(alan, "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "<p>road 2</p>"})
	r := h.Refused(alan, "update_artifact", map[string]any{"id": id, "title": "Renamed"}, authority.Forbidden)
	mustContain(t, r.Sentence, "agents_manage_others")
	h.manageOthers = true
	h.OK(turn(alan, "turn-a2", "ada"), "update_artifact", map[string]any{"id": id, "title": "Renamed"})
	h.manageOthers = false

	// The requester ceiling: alan acting for bob (a contributor) publishes;
	// acting for grace (no relation) is told it does not exist.
	h.OK(turn(alan, "turn-bob", "bob"), "publish_artifact", map[string]any{"id": id, "base_version": 2, "content": "<p>3</p>"})
	h.Refused(turn(alan, "turn-grace", "grace"), "get_artifact", map[string]any{"id": id}, authority.NotFound)
	// A turn for somebody the company does not know opens nothing, not
	// even what the agent made itself.
	own := h.create(turn(alan, "turn-own", "alan"), "Alan's notes", "n")
	for tool, args := range map[string]map[string]any{
		"get_artifact":       {"id": own},
		"publish_artifact":   {"id": own, "base_version": 1, "content": "x"},
		"list_artifacts":     {},
		"create_artifact":    {"kind": "doc", "title": "t"},
		"read_artifact_data": {"id": "art_ffff"},
	} {
		r := h.Refused(turn(alan, "turn-x", "stranger@example.com"), tool, args, authority.Forbidden)
		mustContain(t, r.Sentence, "does not know")
	}
	un := h.OK(ada, "unshare_artifact", map[string]any{"id": id, "to": "unit:core"})
	if un["outcome"] != "applied" {
		t.Fatalf("unshare %v", un)
	}
	h.Refused(bob, "get_artifact", map[string]any{"id": id}, authority.NotFound)
}

// ART-2: an agent's own artifact may be edited for anybody who can
// message it; reading and sharing it for them never.
func TestOwnArtifactExemption(t *testing.T) {
	h := newHarness(t)
	id := h.create(turn(alan, "t0", "alan"), "Alan's page", "<p>mine</p>")
	forGrace := turn(alan, "t1", "grace")
	if out := h.OK(forGrace, "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "<p>for grace</p>"}); num(out["version"]) != 2 {
		t.Fatalf("publish %v", out)
	}
	h.Refused(forGrace, "get_artifact", map[string]any{"id": id}, authority.NotFound)
	h.Refused(forGrace, "share_artifact", map[string]any{"id": id, "to": "grace"}, authority.NotFound)
	// For ada, whom alan's artifact is shared with as an editor, sharing
	// still takes the owner's role, which she does not hold.
	h.OK(turn(alan, "t2", "alan"), "share_artifact", map[string]any{"id": id, "to": "ada", "role": "editor"})
	h.Refused(turn(alan, "t3", "ada"), "share_artifact", map[string]any{"id": id, "to": "bob"}, authority.Forbidden)
	h.OK(turn(alan, "t3", "ada"), "get_artifact", map[string]any{"id": id})
}

// ART-4: the trash serves nothing and takes no write, naming the trash and
// its owner; trash, restore and purge are a person's.
func TestTrash(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Old", "<p>old</p>")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "grace", "role": "editor"})
	ctx := context.Background()
	if err := h.store.Trash(ctx, alan, id); err == nil {
		t.Fatal("an agent trashed an artifact")
	}
	if err := h.store.Trash(ctx, grace, id); !errIs(err, authority.Forbidden) {
		t.Fatalf("an editor who is not the owner trashed it: %v", err)
	}
	if err := h.store.Trash(ctx, ada, id); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"get_artifact", map[string]any{"id": id}},
		{"read_artifact_data", map[string]any{"id": id}},
		{"query_artifact_data", map[string]any{"id": id, "collection": "x"}},
		{"publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "x"}},
		{"write_artifact_data", map[string]any{"id": id, "ops": []any{map[string]any{"op": "delete", "collection": "x", "doc": "d"}}}},
	} {
		r := h.Refused(grace, call.tool, call.args, authority.Forbidden)
		mustContain(t, r.Sentence, "in the trash", "@ada")
	}
	h.Refused(bob, "get_artifact", map[string]any{"id": id}, authority.NotFound) // no relation still sees nothing
	if list := asList(h.OK(ada, "list_artifacts", map[string]any{})["artifacts"]); len(list) != 0 {
		t.Fatalf("the trash is listed: %v", list)
	}
	if err := h.store.Restore(ctx, ada, id); err != nil {
		t.Fatal(err)
	}
	h.OK(grace, "get_artifact", map[string]any{"id": id})
	if err := h.store.Purge(ctx, ada, id, ""); !errIs(err, authority.Invalid) {
		t.Fatalf("purging what is not in the trash: %v", err)
	}
}

func errIs(err error, c authority.Class) bool {
	r := authority.AsRefusal(err)
	return err != nil && r.Class == c
}

// ART-5: an administrator with no share reads through the admin path,
// and the record is written first — the owner and editors see it in the
// history; a read whose record cannot be written shows nothing. Holding a
// share, an administrator reads as that share, unrecorded.
func TestAdminOverride(t *testing.T) {
	h := newHarness(t)
	id := h.create(ada, "Payroll", "<p>salaries</p>")
	g := h.OK(root, "get_artifact", map[string]any{"id": id})
	if g["role"] != "administrator (admin path)" || g["writer"] != false {
		t.Fatalf("admin read %v %v", g["role"], g["writer"])
	}
	h.Refused(root, "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "x"}, authority.Forbidden)
	hist := asList(h.OK(ada, "get_artifact", map[string]any{"id": id})["history"])
	last := asMap(hist[len(hist)-1])
	if last["by"] != "root" || !strings.Contains(last["what"].(string), "admin path") {
		t.Fatalf("history %v", hist)
	}
	for _, fault := range []func(*statetest.Faults){
		func(f *statetest.Faults) { f.Refuse = true },
		func(f *statetest.Faults) { f.DropAcks = 1 },
	} {
		h.log.Set(fault)
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"get_artifact", map[string]any{"id": id}},
			{"read_artifact_data", map[string]any{"id": id}},
			{"query_artifact_data", map[string]any{"id": id, "collection": "x"}},
		} {
			res := h.Raw(root, call.tool, call.args)
			if c, _ := servers.ClassOf(res); c != authority.Unavailable {
				t.Fatalf("%s with the record refused: %v", call.tool, res.Content)
			}
			mustContain(t, textOf(res), "record could not be written; nothing was shown")
			if strings.Contains(textOf(res), "salaries") {
				t.Fatal("content shown without its record")
			}
			h.log.Set(fault) // DropAcks counts down
		}
		if _, err := h.store.Open(context.Background(), root, id, ""); !errIs(err, authority.Unavailable) {
			t.Fatalf("the file route without its record: %v", err)
		}
		h.log.Set(func(f *statetest.Faults) { *f = statetest.Faults{} })
	}
	// Holding a viewer share, root reads as it: nothing recorded.
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "root"})
	before := len(asList(h.OK(ada, "get_artifact", map[string]any{"id": id})["history"]))
	if g := h.OK(root, "get_artifact", map[string]any{"id": id}); g["role"] != "viewer" {
		t.Fatalf("admin with a share reads as %v", g["role"])
	}
	if after := len(asList(h.OK(ada, "get_artifact", map[string]any{"id": id})["history"])); after != before {
		t.Fatalf("a read as a share was recorded: %d -> %d", before, after)
	}
}
