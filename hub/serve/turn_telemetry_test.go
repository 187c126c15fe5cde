package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics reads the node's GET /metrics as Prometheus would.
func (n *turnNode) scrapeMetrics(token string) map[string]*dto.MetricFamily {
	n.t.Helper()
	resp, err := hubtest.Client(token).Get(n.base + "/metrics")
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		n.t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		n.t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// series is the value of the series of a family with exactly these
// labels: a counter's value or a histogram's count; -1 when there is none.
func series(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range fams[name].GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		if m.Histogram != nil {
			return float64(m.GetHistogram().GetSampleCount())
		}
		return m.GetCounter().GetValue()
	}
	return -1
}

// A model endpoint that is down ends the turn failed, and the item's
// activity says so where a person looks, in the hub's own words: which
// endpoint, what failed, what to do. The hub wrote that sentence, so it is
// not fenced as a seat's (WR-10 fences what somebody else wrote). The
// node's /metrics counts the turn and the model call that failed.
func TestModelDownIsSaidOnTheItem(t *testing.T) {
	// The stand-in model, stopped: its loopback port refuses connections.
	model := modeltest.Start(t, modeltest.Steps(finished))
	model.Close()
	n := startTurnNode(t, model, company, env)
	ada := n.client(env["ADA_TOKEN"])
	key := call(t, ada, "create_work_item", map[string]any{"title": "Nobody answers"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant are you there?"})
	if end := n.turnEnded("assistant", key); end["outcome"] != "failed" {
		t.Fatalf("turn ended %v", end)
	}

	var row map[string]any
	for _, a := range call(t, ada, "list_activity", map[string]any{"item": key})["activity"].([]any) {
		if a := a.(map[string]any); a["action"] == "turn_failed" {
			row = a
		}
	}
	if row == nil {
		t.Fatal("the item's activity says nothing of the failed turn")
	}
	summary := row["summary"].(string)
	for _, want := range []string{model.URL() + "/v1", "refused the connection", `"fake"`, `"m-1"`, "base_url"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the activity's line does not say %q: %s", want, summary)
		}
	}
	change := call(t, ada, "get_activity", map[string]any{"id": row["id"]})
	b, _ := json.Marshal(change["change"])
	if strings.Contains(string(b), servers.FenceOpen) || strings.Contains(string(b), "partly written by an AI seat") {
		t.Errorf("the hub's reason is fenced as a seat's: %s", b)
	}
	if !strings.Contains(string(b), "refused the connection") {
		t.Errorf("the change record has no reason: %s", b)
	}

	fams := n.scrapeMetrics(env["ADA_TOKEN"])
	if v := series(fams, "crewlet_agent_turns_total", "outcome", "failed"); v != 1 {
		t.Errorf("failed turns counted: %v", v)
	}
	if v := series(fams, "crewlet_model_calls_total", "provider", "fake", "model", "m-1", "outcome", "unreachable"); v != 1 {
		t.Errorf("unreachable model calls counted: %v", v)
	}
}

// GET /metrics counts a node's turns by outcome and how long they took,
// its model calls by provider, model and outcome with their latency, and
// the tokens they spent, input and output, as the provider reported them.
func TestTurnAndModelMetrics(t *testing.T) {
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 {
			r := reply("comment_on_work_item", map[string]any{"key": itemOf(c), "body": "On it."})
			r.Input, r.Output = 120, 7
			return r
		}
		r := finished
		r.Input, r.Output = 150, 3
		return r
	})
	n := startTurnNode(t, model, company, env)
	ada := n.client(env["ADA_TOKEN"])
	before := n.scrapeMetrics(env["ADA_TOKEN"])
	if v := series(before, "crewlet_agent_turns_total", "outcome", "delivered"); v > 0 {
		t.Fatalf("turns before any: %v", v)
	}
	key := call(t, ada, "create_work_item", map[string]any{"title": "Answer me"})["key"].(string)
	call(t, ada, "comment_on_work_item", map[string]any{"key": key, "body": "@assistant please answer"})
	if end := n.turnEnded("assistant", key); end["outcome"] != "delivered" {
		t.Fatalf("turn ended %v", end)
	}
	fams := n.scrapeMetrics(env["ADA_TOKEN"])
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"crewlet_agent_turns_total", []string{"outcome", "delivered"}, 1},
		{"crewlet_agent_turn_duration_seconds", []string{"outcome", "delivered"}, 1},
		{"crewlet_model_calls_total", []string{"provider", "fake", "model", "m-1", "outcome", "ok"}, 2},
		{"crewlet_model_call_duration_seconds", []string{"provider", "fake", "model", "m-1"}, 2},
		{"crewlet_model_tokens_total", []string{"provider", "fake", "model", "m-1", "direction", "input"}, 270},
		{"crewlet_model_tokens_total", []string{"provider", "fake", "model", "m-1", "direction", "output"}, 10},
	} {
		if v := series(fams, c.name, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// Nothing of one turn or item becomes a label: the series stay as
	// many as the company's models and the outcomes.
	for _, name := range []string{"crewlet_agent_turns_total", "crewlet_model_calls_total", "crewlet_model_tokens_total"} {
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), key) || l.GetName() == "seat" || l.GetName() == "turn" {
					t.Fatalf("%s carries a per-turn label: %v", name, m)
				}
			}
		}
	}
}
