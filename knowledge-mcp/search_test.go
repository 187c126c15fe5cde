package knowledge

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/search/searchtest"
)

func found(out map[string]any) []string {
	var ids []string
	for _, p := range out["pages"].([]any) {
		ids = append(ids, p.(map[string]any)["id"].(string))
	}
	return ids
}

// KB-3: search_knowledge finds pages by their words, in one container when
// asked; a draft is found by no search until it is published, and a page in
// the trash by none; without an embeddings model hybrid says it ran on
// keywords alone and semantic runs nothing.
func TestSearchKnowledge(t *testing.T) {
	h := newHarness(t)
	deploy := h.write(ada, map[string]any{"title": "Deploying the service", "body": "Blue-green deployments with a canary."})
	ops := h.write(grace, map[string]any{"title": "Deploy freeze", "body": "No deployments on Fridays."})
	draftID := h.write(alan, map[string]any{"title": "Deployment ideas", "body": "Maybe canary everything.", "status": "draft"})

	kw := h.OK(alan, "search_knowledge", map[string]any{"query": "canary deployments", "mode": "keyword"})
	if got := found(kw); !slices.Equal(got, []string{deploy, ops}) || kw["mode"] != "keyword" || kw["degraded"] != nil {
		t.Fatalf("keyword %v", kw)
	}
	first := kw["pages"].([]any)[0].(map[string]any)
	mustContain(t, first["snippet"].(string), servers.FenceOpen, "**canary**", "@ada")
	if got := found(h.OK(alan, "search_knowledge", map[string]any{"query": "deployments", "mode": "keyword", "container": "OPS"})); !slices.Equal(got, []string{ops}) {
		t.Fatalf("in OPS: %v", got)
	}
	hy := h.OK(alan, "search_knowledge", map[string]any{"query": "deployments"})
	if hy["mode"] != "keyword" || len(found(hy)) != 2 {
		t.Fatalf("hybrid %v", hy)
	}
	mustContain(t, hy["degraded"].(string), "keyword alone")
	se := h.OK(alan, "search_knowledge", map[string]any{"query": "deployments", "mode": "semantic"})
	if se["mode"] != "none" || len(found(se)) != 0 {
		t.Fatalf("semantic %v", se)
	}
	mustContain(t, se["degraded"].(string), "says nothing about whether such a page exists")

	// Published, the draft is found; in the trash, no page is.
	h.OK(alan, "save_page", map[string]any{"id": draftID, "version": 1, "status": "published"})
	if got := found(h.OK(alan, "search_knowledge", map[string]any{"query": "canary", "mode": "keyword"})); !slices.Contains(got, draftID) {
		t.Fatalf("the published draft is not found: %v", got)
	}
	trash(t, h, deploy)
	if got := found(h.OK(alan, "search_knowledge", map[string]any{"query": "canary", "mode": "keyword"})); slices.Contains(got, deploy) {
		t.Fatalf("a page in the trash is found: %v", got)
	}

	h.Refused(alan, "search_knowledge", map[string]any{"query": strings.Repeat("x", 401)}, authority.Invalid)
	h.Refused(alan, "search_knowledge", map[string]any{"query": "x", "mode": "vibes"}, authority.Invalid)
	h.Refused(alan, "search_knowledge", map[string]any{"query": "x", "container": "agent_diary"}, authority.Forbidden)
}

// trash puts a page in the trash, as the operator surface's trash does:
// straight through the node, since no seat tool does.
func trash(t *testing.T, h *harness, id string) {
	t.Helper()
	if _, err := h.node.Write(context.Background(), stateOp(kindTrash, trashPayload{ID: id})); err != nil {
		t.Fatal(err)
	}
}

// KB-3 by meaning: with an embeddings provider a page is found by what it
// means when no word of it matches; hybrid fuses both; a draft is never
// found; the provider stopped mid-test degrades the answer with a sentence.
func TestSearchKnowledgeByMeaning(t *testing.T) {
	p := searchtest.NewProvider(t)
	h := newHarnessWith(t, search.NewOpenAIEmbedder(p.BaseURL(), "", searchtest.Model, 8192))
	auto := h.write(ada, map[string]any{"title": "Servicing the automobile", "body": "Oil every six months."})
	car := h.write(ada, map[string]any{"title": "Car park rules"})
	h.write(ada, map[string]any{"title": "Automobile fleet plans", "body": "Unannounced.", "status": "draft"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.ix.WaitEmbedded(ctx, h.node.Position()); err != nil {
		t.Fatal(err)
	}
	se := h.OK(alan, "search_knowledge", map[string]any{"query": "car", "mode": "semantic"})
	if got := found(se); se["mode"] != "semantic" || !slices.Contains(got, auto) || len(got) != 2 {
		t.Fatalf("semantic %v", se)
	}
	hy := h.OK(alan, "search_knowledge", map[string]any{"query": "car"})
	if got := found(hy); hy["mode"] != "hybrid" || len(got) != 2 || got[0] != car {
		t.Fatalf("hybrid %v", hy)
	}
	p.Stop()
	hy = h.OK(alan, "search_knowledge", map[string]any{"query": "car"})
	if got := found(hy); hy["mode"] != "keyword" || !slices.Equal(got, []string{car}) {
		t.Fatalf("hybrid with the provider down: %v", hy)
	}
	mustContain(t, hy["degraded"].(string), "embeddings provider")
}
