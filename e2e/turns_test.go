package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// turnCompany is a company whose assistant runs its turns on the fake
// model at {{BASE}}, spoken to over {{API}}.
const turnCompany = `
providers:
  fake: {api: {{API}}, base_url: "{{BASE}}", api_key: "${E2E_MODEL_KEY}"}
models:
  default: {provider: fake, model: e2e-model}
units:
  - id: core
    name: Core
    lead: ada
    project: CORE
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Assistant, handle: assistant}
api:
  auth:
    tokens:
      - {id: ada, token: "${E2E_TOKEN}", seat: ada}
`

var e2eItemRe = regexp.MustCompile(`CORE-[0-9]+`)

// TRK-4, BLT-3, WR-5: against the built binary and a fake model server
// (chat completions, and the Messages API): a person's comment naming
// @assistant on an item wakes the seat; the model is called with the
// seat's tools; its tool call posts a comment on the item as the seat.
// The hub is killed with SIGKILL while the model is answering the turn's
// second round, after the comment landed; started again on the same
// data, it runs the turn again under the same turn key, and the comment
// is on the item once, however the model words it the second time.
func TestTurnSurvivesKill9(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			// The first time the model is asked for the turn's second
			// round it never answers: the hub is killed meanwhile.
			// A model words its remark anew each time it is asked; the
			// turn's key is what keeps a re-run from posting it twice.
			var once sync.Once
			var attempts atomic.Int32
			never := make(chan struct{})
			model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
				if c.Round() == 0 {
					body := fmt.Sprintf("On it: the login page is my next task (attempt %d).", attempts.Add(1))
					return modeltest.Reply{Calls: []modeltest.Call{{Name: "comment_on_work_item",
						Args: map[string]any{"key": e2eItemRe.FindString(c.UserText()), "body": body}}}}
				}
				held := false
				once.Do(func() { held = true })
				if held {
					return modeltest.Reply{Hold: never}
				}
				return modeltest.Reply{Text: "Posted my answer on the item."}
			})
			base := model.URL()
			if api == "openai" {
				base = model.OpenAIBase()
			}
			doc := strings.NewReplacer("{{API}}", api, "{{BASE}}", base).Replace(turnCompany)
			cfg := filepath.Join(t.TempDir(), "company.yaml")
			if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			env := []string{"E2E_TOKEN=" + e2eToken, "E2E_MODEL_KEY=sk-e2e-model-key"}
			h := startHubIn(t, dir, env, "--config", cfg)
			cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
			if err != nil {
				t.Fatal(err)
			}
			key := structured(t, callTool(t, cs, "create_work_item", map[string]any{"title": "The login page is slow"}))["key"].(string)
			callTool(t, cs, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant can you take this one?"})
			if err := model.WaitFor(ctxT(t), 2); err != nil {
				t.Fatalf("%v; log:\n%s", err, h.logs())
			}
			first := model.Requests()[0]
			if first.API != api || !first.Offers("comment_on_work_item") || !first.Offers("list_work_items") ||
				!strings.Contains(first.UserText(), "@assistant can you take this one?") {
				t.Fatalf("the first model call: %s offered %v\n%s", first.API, first.Tools, first.UserText())
			}
			if n := seatComments(t, cs, key); n != 1 {
				t.Fatalf("before the kill: %d comments by the seat", n)
			}

			// kill -9, mid-turn.
			if err := syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = h.cmd.Wait()
			h.stderr.Close()
			turn := turnKeyIn(t, h.logs())

			h2 := startHubIn(t, dir, env, "--config", cfg)
			waitLog(t, h2, 60*time.Second, "turn_ended", `"turn":"`+turn+`"`, `"outcome":"delivered"`)
			cs2, err := goSDKClient(t, h2.mcpURL(), e2eToken, "")
			if err != nil {
				t.Fatal(err)
			}
			if n := seatComments(t, cs2, key); n != 1 {
				t.Fatalf("after the re-run: %d comments by the seat", n)
			}
			rerun := model.Requests()[len(model.Requests())-1]
			if res := rerun.LastResults(); len(res) != 1 || !strings.Contains(res[0].Text, `"already_posted":true`) {
				t.Fatalf("the re-run's comment was answered %+v", res)
			}
			if strings.Contains(h.logs()+h2.logs(), "sk-e2e-model-key") {
				t.Fatal("the model's key is in the log")
			}
		})
	}
}

// seatComments counts the item's comments the assistant wrote.
func seatComments(t *testing.T, cs *mcp.ClientSession, key string) int {
	t.Helper()
	item := structured(t, callTool(t, cs, "get_work_item", map[string]any{"key": key}))["item"].(map[string]any)
	n := 0
	for _, c := range item["thread"].([]any) {
		if c.(map[string]any)["by"] == "assistant" {
			n++
		}
	}
	return n
}

// turnKeyIn is the key of the turn a log started.
func turnKeyIn(t *testing.T, logs string) string {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "turn_started" {
			return fmt.Sprint(rec["turn"])
		}
	}
	t.Fatalf("no turn_started in the log:\n%s", logs)
	return ""
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("refused: %s", hubtest.Text(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
