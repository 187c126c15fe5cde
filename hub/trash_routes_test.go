package hub

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// trashCompany has a space led by ada (an administrator), two more
// people and a credential bound to nobody.
const trashCompany = `
units:
  - id: core
    name: Core
    space: CORE
    lead: ada
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Grace, handle: grace, kind: human}
      - {name: Linus, handle: linus, kind: human}
      - {name: Bot, handle: bot}
api:
  auth:
    tokens:
      - {id: laptop, token: "${ADA_TOKEN}", seat: ada}
      - {id: phone, token: "${GRACE_TOKEN}", seat: grace}
      - {id: linus-laptop, token: "${LINUS_TOKEN}", seat: linus}
      - {id: ci, token: "${CI_TOKEN}"}
`

const linusToken = "linus-token-123456"

type trashHub struct {
	url string
	// Each person's own go-sdk client on /operator/mcp.
	ada, grace, linus *mcp.ClientSession
}

// newTrashHub serves a hub running the knowledge base and the artifact
// store over one state node, with the dashboard's trash routes; without
// knowledge, the knowledge base is not served (Pages is still given).
func newTrashHub(t *testing.T, withKnowledge bool) *trashHub {
	t.Helper()
	node, err := state.Open(context.Background(), state.Options{Dir: filepath.Join(t.TempDir(), "state"),
		Projectors: append(knowledge.Projectors(), artifacts.Projectors()...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c, err := config.Parse([]byte(trashCompany))
	if err != nil {
		t.Fatal(err)
	}
	env := hubtest.NewEnv(map[string]string{"ADA_TOKEN": adaToken, "GRACE_TOKEN": graceToken, "LINUS_TOKEN": linusToken, "CI_TOKEN": ciToken})
	artifactDeps := func(d Deps) artifacts.Deps {
		return artifacts.Deps{Node: node, Directory: d.Directory, Logger: d.Logger, BaseURL: func() string { return "" }}
	}
	fp := []FirstParty{{Name: "artifacts", New: func(tr servers.Trust, d Deps) *mcp.Server {
		return artifacts.NewServer(artifactDeps(d), tr)
	}}}
	if withKnowledge {
		fp = append(fp, FirstParty{Name: "knowledge", New: func(tr servers.Trust, d Deps) *mcp.Server {
			return knowledge.NewServer(knowledge.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, tr)
		}})
	}
	h, err := New(context.Background(), Options{Company: c, Env: env.Lookup, FirstParty: fp,
		Artifacts: func(d Deps) ArtifactFiles { return artifacts.NewStore(artifactDeps(d)) },
		Pages: func(d Deps) PageTrash {
			return knowledge.NewStore(knowledge.Deps{Node: node, Directory: d.Directory, Logger: d.Logger})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	th := &trashHub{url: hubtest.Serve(t, h.Handler())}
	th.ada = hubtest.Connect(t, th.url+"/operator/mcp", adaToken, "")
	th.grace = hubtest.Connect(t, th.url+"/operator/mcp", graceToken, "")
	th.linus = hubtest.Connect(t, th.url+"/operator/mcp", linusToken, "")
	return th
}

// call makes one tool call over a person's client and answers its
// structured content and, when refused, its class.
func (th *trashHub) call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, authority.Class) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	_ = json.Unmarshal(b, &sc)
	if res.IsError {
		class, _ := sc["class"].(string)
		if class == "" {
			t.Fatalf("%s refused with no class: %s", tool, hubtest.Text(res))
		}
		return sc, authority.Class(class)
	}
	return sc, ""
}

// ok is a call that must succeed.
func (th *trashHub) ok(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	sc, class := th.call(t, cs, tool, args)
	if class != "" {
		t.Fatalf("%s refused %s: %v", tool, class, sc)
	}
	return sc
}

// refused is a call that must be refused class, its sentence holding says.
func (th *trashHub) refused(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, class authority.Class, says ...string) {
	t.Helper()
	sc, got := th.call(t, cs, tool, args)
	if got != class {
		t.Fatalf("%s answered %q, want %s: %v", tool, got, class, sc)
	}
	sentence, _ := sc["sentence"].(string)
	if sentence == "" {
		sentence, _ = sc["error"].(string)
	}
	for _, s := range says {
		if !strings.Contains(sentence, s) {
			t.Errorf("%s: %q does not say %q", tool, sentence, s)
		}
	}
}

// route sends one request to a trash route as token and answers the
// status and the decoded body.
func (th *trashHub) route(t *testing.T, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, th.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// wantRoute checks a route's answer: its status and, when refused, its
// class and words.
func (th *trashHub) wantRoute(t *testing.T, token, method, path string, body any, status int, class authority.Class, says ...string) map[string]any {
	t.Helper()
	got, out := th.route(t, token, method, path, body)
	if got != status || (class != "" && out["class"] != string(class)) {
		t.Fatalf("%s %s answered %d %v, want %d %s", method, path, got, out, status, class)
	}
	for _, s := range says {
		if e, _ := out["error"].(string); !strings.Contains(e, s) {
			t.Errorf("%s %s: %q does not say %q", method, path, e, s)
		}
	}
	return out
}

func trashedIDs(out map[string]any, part string) []string {
	var ids []string
	list, _ := out[part].([]any)
	for _, r := range list {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	return ids
}

// ART-4: the dashboard's trash of artifacts, over real HTTP. Grace owns an
// artifact and shares it with linus as editor: he may not put it in the
// trash (forbidden); the id means nothing to a credential with no
// relation (not found, the missing id's words); grace may. There, every
// read and write of it is refused forbidden naming the trash and its
// owner — tools and the file route alike — and it is in grace's trash
// and the administrator's, not linus's. Restored, linus reads and writes
// it again. Transferred to linus, he owns it and grace edits; linus
// purges it with a one-line reason and it is gone for everybody.
func TestDashboardTrashOfArtifacts(t *testing.T) {
	th := newTrashHub(t, true)
	id := th.ok(t, th.grace, "create_artifact", map[string]any{"kind": "html", "title": "Launch", "content": "<p>go</p>"})["id"].(string)
	th.ok(t, th.grace, "share_artifact", map[string]any{"id": id, "to": "linus", "role": "editor"})
	path := "/artifacts/" + id

	th.wantRoute(t, linusToken, http.MethodDelete, path, nil, http.StatusForbidden, authority.Forbidden, "for its owner or an administrator")
	th.wantRoute(t, ciToken, http.MethodDelete, path, nil, http.StatusNotFound, authority.NotFound, authority.ArtifactMissing(id).Sentence)
	th.wantRoute(t, graceToken, http.MethodDelete, path, nil, http.StatusOK, "")

	th.refused(t, th.linus, "get_artifact", map[string]any{"id": id}, authority.Forbidden, id+" is in the trash", "@grace")
	th.refused(t, th.linus, "publish_artifact", map[string]any{"id": id, "base_version": 1, "content": "<p>stop</p>"}, authority.Forbidden, "in the trash")
	th.refused(t, th.grace, "update_artifact", map[string]any{"id": id, "title": "Relaunch"}, authority.Forbidden, "in the trash")
	th.wantRoute(t, linusToken, http.MethodGet, path+"/", nil, http.StatusForbidden, authority.Forbidden, "in the trash")

	for token, want := range map[string][]string{graceToken: {id}, adaToken: {id}, linusToken: nil} {
		if got := trashedIDs(th.wantRoute(t, token, http.MethodGet, "/trash", nil, http.StatusOK, ""), "artifacts"); !slices.Equal(got, want) {
			t.Errorf("a trash lists %v, want %v", got, want)
		}
	}

	th.wantRoute(t, linusToken, http.MethodPost, path+"/restore", nil, http.StatusForbidden, authority.Forbidden)
	th.wantRoute(t, graceToken, http.MethodPost, path+"/restore", nil, http.StatusOK, "")
	th.wantRoute(t, graceToken, http.MethodPost, path+"/restore", nil, http.StatusBadRequest, authority.Invalid, "not in the trash")
	th.ok(t, th.linus, "get_artifact", map[string]any{"id": id})
	th.ok(t, th.linus, "update_artifact", map[string]any{"id": id, "title": "Launch, again"})

	// Transfer: the owner's or an administrator's, to a seat.
	th.wantRoute(t, linusToken, http.MethodPost, path+"/transfer", map[string]any{"to": "linus"}, http.StatusForbidden, authority.Forbidden)
	th.wantRoute(t, graceToken, http.MethodPost, path+"/transfer", map[string]any{"to": "nobody"}, http.StatusBadRequest, authority.Invalid, "nobody in the company")
	th.wantRoute(t, graceToken, http.MethodPost, path+"/transfer", map[string]any{"whom": "linus"}, http.StatusBadRequest, authority.Invalid)
	th.wantRoute(t, graceToken, http.MethodPost, path+"/transfer", map[string]any{"to": "linus"}, http.StatusOK, "")
	if role := th.ok(t, th.linus, "get_artifact", map[string]any{"id": id})["role"]; role != "owner" {
		t.Fatalf("linus's role after the transfer: %v", role)
	}
	if role := th.ok(t, th.grace, "get_artifact", map[string]any{"id": id})["role"]; role != "editor" {
		t.Fatalf("grace's role after the transfer: %v", role)
	}

	// Purge: of what is in the trash, by its owner, with a one-line reason.
	th.wantRoute(t, linusToken, http.MethodPost, path+"/purge", map[string]any{"reason": "old"}, http.StatusBadRequest, authority.Invalid, "not in the trash")
	th.wantRoute(t, linusToken, http.MethodDelete, path, nil, http.StatusOK, "")
	th.wantRoute(t, graceToken, http.MethodPost, path+"/purge", nil, http.StatusForbidden, authority.Forbidden)
	th.wantRoute(t, linusToken, http.MethodPost, path+"/purge", map[string]any{"reason": strings.Repeat("why ", 100)}, http.StatusBadRequest, authority.Invalid, "at most 280")
	th.wantRoute(t, linusToken, http.MethodPost, path+"/purge", map[string]any{"reason": "launched elsewhere"}, http.StatusOK, "")
	th.refused(t, th.linus, "get_artifact", map[string]any{"id": id}, authority.NotFound, authority.ArtifactMissing(id).Sentence)
	if got := trashedIDs(th.wantRoute(t, adaToken, http.MethodGet, "/trash", nil, http.StatusOK, ""), "artifacts"); len(got) != 0 {
		t.Fatalf("the trash after the purge: %v", got)
	}
}

// ART-4: the dashboard puts a page in the trash — the lead of its space's,
// an administrator's or its maker's decision, not a colleague's. There,
// get_page, save_page and comment_on_page refuse it forbidden naming the
// trash and who may restore it; it is in the trash of whoever may take it
// out; restore_from_trash brings it back to reads and edits. Where the
// knowledge base is not served, the route serves nothing.
func TestDashboardTrashOfPages(t *testing.T) {
	th := newTrashHub(t, true)
	id := th.ok(t, th.grace, "write_page", map[string]any{"title": "Onboarding", "body": "Read this first.", "container": "CORE"})["id"].(string)
	path := "/knowledge/pages/" + id

	th.wantRoute(t, linusToken, http.MethodDelete, path, nil, http.StatusForbidden, authority.Forbidden, "the lead of CORE (ada)", "@grace, who made it")
	th.wantRoute(t, linusToken, http.MethodDelete, "/knowledge/pages/pg_nope", nil, http.StatusNotFound, authority.NotFound)
	if out := th.wantRoute(t, graceToken, http.MethodDelete, path, nil, http.StatusOK, ""); out["outcome"] != "applied" || out["title"] != "Onboarding" {
		t.Fatalf("grace trashed her page: %v", out)
	}

	says := []string{id + " is in the trash", "restore_from_trash", "@grace, who put it there"}
	th.refused(t, th.ada, "get_page", map[string]any{"id": id}, authority.Forbidden, says...)
	th.refused(t, th.linus, "save_page", map[string]any{"id": id, "version": 2, "body": "Skip this."}, authority.Forbidden, says...)
	th.refused(t, th.linus, "comment_on_page", map[string]any{"id": id, "body": "Gone?"}, authority.Forbidden, says...)

	for token, want := range map[string][]string{graceToken: {id}, adaToken: {id}, linusToken: nil} {
		if got := trashedIDs(th.wantRoute(t, token, http.MethodGet, "/trash", nil, http.StatusOK, ""), "pages"); !slices.Equal(got, want) {
			t.Errorf("a trash lists %v, want %v", got, want)
		}
	}
	th.refused(t, th.linus, "restore_from_trash", map[string]any{"id": id}, authority.Forbidden)
	th.ok(t, th.grace, "restore_from_trash", map[string]any{"id": id})
	page := th.ok(t, th.linus, "get_page", map[string]any{"id": id})["page"].(map[string]any)
	th.ok(t, th.linus, "save_page", map[string]any{"id": id, "version": page["version"], "body": "Read this, then ask."})

	bare := newTrashHub(t, false)
	bare.wantRoute(t, adaToken, http.MethodDelete, path, nil, http.StatusNotFound, authority.NotFound, "no native knowledge base")
}
