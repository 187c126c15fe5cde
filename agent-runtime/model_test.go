package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// Both adapters against a fake server speaking the vendor's API: the
// system text, the tools with their schemas, a tool call with its
// arguments, the results sent back with the call they answer, the usage
// reported, and the key sent only as the vendor expects it, never read
// from the hub's environment.
func TestModelsRoundTrip(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-from-env")
			t.Setenv("ANTHROPIC_API_KEY", "sk-from-env")
			srv := modeltest.Start(t, modeltest.Steps(
				modeltest.Reply{Calls: []modeltest.Call{{Name: "comment_on_work_item", Args: map[string]any{"key": "CORE-1", "body": "done"}}}, Input: 120, Output: 30},
				modeltest.Reply{Text: "All done."},
			))
			spec := ModelSpec{API: api, Provider: "fake", BaseURL: srv.URL(), Model: "m-1", MaxOutputTokens: 256}
			if api == "openai" {
				spec.BaseURL = srv.OpenAIBase()
			}
			m, err := NewModel(spec)
			if err != nil {
				t.Fatal(err)
			}
			schema := json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"body":{"type":"string"}},"required":["key","body"]}`)
			req := Request{
				System:   "You are the assistant.",
				Messages: []Message{{From: FromUser, Text: "please comment"}},
				Tools:    []ToolDef{{Name: "comment_on_work_item", Description: "Post to the thread.", Schema: schema}},
			}
			rep, err := m.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Calls) != 1 || rep.Calls[0].Name != "comment_on_work_item" || rep.Calls[0].ID == "" {
				t.Fatalf("calls %+v", rep.Calls)
			}
			var args map[string]string
			if err := json.Unmarshal(rep.Calls[0].Args, &args); err != nil || args["key"] != "CORE-1" || args["body"] != "done" {
				t.Fatalf("args %s: %v", rep.Calls[0].Args, err)
			}
			if rep.Usage != (Usage{120, 30}) {
				t.Fatalf("usage %+v", rep.Usage)
			}
			req.Messages = append(req.Messages,
				Message{From: FromModel, Calls: rep.Calls},
				Message{From: FromTools, Results: []ToolResult{{CallID: rep.Calls[0].ID, Text: `{"outcome":"applied"}`}}})
			rep, err = m.Complete(t.Context(), req)
			if err != nil || rep.Text != "All done." || len(rep.Calls) != 0 {
				t.Fatalf("second answer %+v %v", rep, err)
			}
			if rep.Usage.Input == 0 || rep.Usage.Output == 0 {
				t.Fatalf("unreported usage was not estimated: %+v", rep.Usage)
			}
			got := srv.Requests()
			if len(got) != 2 {
				t.Fatalf("%d requests", len(got))
			}
			first, second := got[0], got[1]
			if first.System != "You are the assistant." || first.Model != "m-1" || !first.Offers("comment_on_work_item") ||
				!strings.Contains(string(first.Schemas["comment_on_work_item"]), `"required":["key","body"]`) {
				t.Fatalf("first request %+v", first)
			}
			res := second.LastResults()
			if len(res) != 1 || res[0].CallID != rep0ID(got) || res[0].Text != `{"outcome":"applied"}` {
				t.Fatalf("results sent back %+v", res)
			}
			for _, h := range []string{"Authorization", "X-Api-Key"} {
				if v := first.Header.Get(h); strings.Contains(v, "sk-from-env") {
					t.Fatalf("the hub's environment was read: %s: %s", h, v)
				}
			}
		})
	}
}

// rep0ID is the id of the call the first request was answered with, as
// the second request names it.
func rep0ID(got []modeltest.Conversation) string {
	for _, m := range got[1].Messages {
		if len(m.Calls) > 0 {
			return m.Calls[0].ID
		}
	}
	return ""
}

// The key goes to the provider as the vendor's SDK sends it, and a failure's
// text never shows it.
func TestModelKey(t *testing.T) {
	srv := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() > 0 || strings.Contains(c.UserText(), "fail") {
			return modeltest.Reply{Status: 400}
		}
		return modeltest.Reply{Text: "ok"}
	})
	for _, tc := range []struct{ api, base, header, want string }{
		{"openai", srv.OpenAIBase(), "Authorization", "Bearer sk-test-123"},
		{"anthropic", srv.URL(), "Authorization", "Bearer sk-test-123"}, // v2 sends the key as a bearer
	} {
		m, err := NewModel(ModelSpec{API: tc.api, Provider: "p", BaseURL: tc.base, APIKey: "sk-test-123", Model: "m", MaxOutputTokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Complete(t.Context(), Request{Messages: []Message{{From: FromUser, Text: "hi"}}}); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		if got := reqs[len(reqs)-1].Header.Get(tc.header); got != tc.want {
			t.Errorf("%s: %s = %q", tc.api, tc.header, got)
		}
		_, err = m.Complete(t.Context(), Request{Messages: []Message{{From: FromUser, Text: "fail sk-test-123"}}})
		if err == nil || strings.Contains(err.Error(), "sk-test-123") {
			t.Errorf("%s: failure %v", tc.api, err)
		}
		if strings.Contains(m.Name(), "sk-") {
			t.Errorf("%s: name shows the key: %s", tc.api, m.Name())
		}
	}
	if _, err := NewModel(ModelSpec{API: "gemini", Model: "x"}); err == nil {
		t.Fatal("an unknown API was accepted")
	}
}
