package e2e_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/hub/hubtest"
)

// KB-1, KB-2 through the operator surface of the default hub: a page is
// written into the embedded company's space, a second links it, and the
// first reads back with who links to it.
func TestKnowledgeThroughTheHub(t *testing.T) {
	h := startHub(t, []string{"CREWLET_OPERATOR_TOKEN="})
	cs, err := goSDKClient(t, h.mcpURL(), h.token, "")
	if err != nil {
		t.Fatal(err)
	}
	first := mustJSONField(t, callTool(t, cs, "write_page", map[string]any{"title": "How we deploy", "body": "Green, then blue."}), "id")
	second := mustJSONField(t, callTool(t, cs, "write_page", map[string]any{"title": "Release checklist",
		"body": "See [How we deploy](#/knowledge/pages/" + first + ")."}), "id")
	res := callTool(t, cs, "get_page", map[string]any{"id": first})
	if res.IsError {
		t.Fatalf("get_page: %s", hubtest.Text(res))
	}
	var got struct {
		Page struct {
			Container  string `json:"container"`
			Body       string `json:"body"`
			LinkedFrom []struct {
				ID string `json:"id"`
			} `json:"linked_from"`
			History []struct {
				By         string `json:"by"`
				OperatorID string `json:"operator_id"`
			} `json:"history"`
		} `json:"page"`
	}
	if err := json.Unmarshal([]byte(hubtest.Text(res)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Page.Container != "CORE" || !strings.Contains(got.Page.Body, "Green, then blue.") ||
		len(got.Page.LinkedFrom) != 1 || got.Page.LinkedFrom[0].ID != second ||
		// OPS-4: the person's write names the credential it came through.
		len(got.Page.History) != 1 || got.Page.History[0].By != "admin" || got.Page.History[0].OperatorID != "operator" {
		t.Fatalf("get_page answered %s", hubtest.Text(res))
	}
	if list := callTool(t, cs, "list_pages", map[string]any{}); list.IsError || !strings.Contains(hubtest.Text(list), "Release checklist") {
		t.Fatalf("list_pages: %s", hubtest.Text(list))
	}
	// KB-3: the page is found by its words; with no embeddings model the
	// answer says it ran on keywords alone.
	found := callTool(t, cs, "search_knowledge", map[string]any{"query": "blue deploy"})
	if found.IsError || !strings.Contains(hubtest.Text(found), first) || !strings.Contains(hubtest.Text(found), "keyword alone") {
		t.Fatalf("search_knowledge: %s", hubtest.Text(found))
	}
}

// The knowledge base on its own (`crewlet knowledge-mcp --as admin`), over
// stdio and over streamable HTTP with the trusted token: a plain client
// writes and reads a page.
func TestStandaloneKnowledge(t *testing.T) {
	bin := crewletBinary(t)
	scenario := func(t *testing.T, cs *mcp.ClientSession) {
		res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "write_page", Arguments: map[string]any{"title": "Standalone page", "body": "hello"}})
		if err != nil || res.IsError {
			t.Fatalf("write_page: %v %s", err, hubtest.Text(res))
		}
		res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "list_pages", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), "Standalone page") {
			t.Fatalf("list_pages: %v %s", err, hubtest.Text(res))
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cmd := exec.Command(bin, "knowledge-mcp", "--as", "admin", "--data-dir", t.TempDir())
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "0"}, nil).Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		scenario(t, cs)
	})
	t.Run("http", func(t *testing.T) {
		dir := t.TempDir()
		env := append(os.Environ(), "CREWLET_TRUSTED_CALLER=knowledge-token-1")
		p := startPeerProcess(t, env, bin, "knowledge-mcp", "--as", "admin", "--http", "127.0.0.1:0", "--data-dir", dir)
		var addr string
		deadline := time.Now().Add(20 * time.Second)
		for addr == "" {
			if b, err := os.ReadFile(filepath.Join(dir, "listen-addr")); err == nil {
				addr = strings.TrimSpace(string(b))
			} else if time.Now().After(deadline) {
				t.Fatalf("no listen-addr; log:\n%s", tailFile(p.LogPath, 20))
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/", HTTPClient: &http.Client{Transport: hubtest.Bearer{Token: "knowledge-token-1"}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "0"}, nil).Connect(ctxT(t), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		scenario(t, cs)
	})
}
