package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The agent runtime's tests here run a whole node as `crewlet serve`
// does, in process: the company file, the log, the hub, the first-party
// servers, the runtime, the operator endpoint a person comments through,
// and a fake model server on loopback answering from a script.

// logWatch keeps every record the node logs and wakes waiters on each.
type logWatch struct {
	mu      sync.Mutex
	records []map[string]any
	changed chan struct{}
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &attrHandler{w: w, attrs: attrs}
}
func (w *logWatch) WithGroup(string) slog.Handler { return w }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	return w.add(r, nil)
}

func (w *logWatch) add(r slog.Record, pre []slog.Attr) error {
	m := map[string]any{"msg": r.Message, "level": r.Level.String()}
	for _, a := range pre {
		m[a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.Resolve().Any()
		return true
	})
	w.mu.Lock()
	w.records = append(w.records, m)
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	return nil
}

type attrHandler struct {
	w     *logWatch
	attrs []slog.Attr
}

func (h *attrHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *attrHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &attrHandler{w: h.w, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}
func (h *attrHandler) WithGroup(string) slog.Handler { return h }
func (h *attrHandler) Handle(_ context.Context, r slog.Record) error {
	return h.w.add(r, h.attrs)
}

// mark is how many records there are so far, for waitSince.
func (w *logWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.records)
}

// waitSince returns the first record logged after a mark that matches
// every key/value of want, waiting for it up to a deadline. A long run
// marks where it is, so it does not read its whole log again for each
// record it waits for.
func (w *logWatch) waitSince(t testing.TB, seen int, want map[string]any) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		recs, changed := w.records, w.changed
		w.mu.Unlock()
		for _, r := range recs[seen:] {
			if matches(r, want) {
				return r
			}
		}
		seen = len(recs)
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no log record %v within 60s", want)
		}
	}
}

// all lists the records matching want so far.
func (w *logWatch) all(want map[string]any) []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	for _, r := range w.records {
		if matches(r, want) {
			out = append(out, r)
		}
	}
	return out
}

// text is every record as JSON, for looking for what must never be there.
func (w *logWatch) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, _ := json.Marshal(w.records)
	return string(b)
}

func matches(r, want map[string]any) bool {
	for k, v := range want {
		if c, ok := v.(contains); ok {
			if !strings.Contains(fmt.Sprint(r[k]), string(c)) {
				return false
			}
			continue
		}
		if fmt.Sprint(r[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// contains matches a record's value holding the text.
type contains string

// turnNode is a node running in process.
type turnNode struct {
	t    testing.TB
	dir  string
	base string
	logs *logWatch
	rt   *agent.Runtime
	stop func() error
}

// startTurnNode runs a node on a company document; {{MODEL}} in it stands
// for the fake model server's root.
func startTurnNode(t testing.TB, model *modeltest.Server, doc string, env map[string]string) *turnNode {
	t.Helper()
	n := &turnNode{t: t, dir: t.TempDir(), logs: newLogWatch()}
	cfg := filepath.Join(n.dir, "company.yaml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(doc, "{{MODEL}}", model.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	var got sync.Mutex
	o := Options{ConfigFile: cfg, DataDir: filepath.Join(n.dir, "data"), Logger: slog.New(n.logs),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		onRuntime: func(rt *agent.Runtime) { got.Lock(); n.rt = rt; got.Unlock() }}
	base, _, stop := runUntilListening(t, o)
	n.base, n.stop = base, stop
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return n
}

// client connects to the operator endpoint with a person's token.
func (n *turnNode) client(token string) *mcp.ClientSession {
	return hubtest.Connect(n.t, n.base+"/operator/mcp", token, "")
}

// call makes an operator call and answers its structured content.
func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %s", tool, err, hubtest.Text(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// turnEnded waits for the end of the turn seat runs about subject.
func (n *turnNode) turnEnded(seat, subject string) map[string]any {
	n.t.Helper()
	return n.turnEndedSince(0, seat, subject)
}

// turnEndedSince is turnEnded for a turn that started after a mark of the
// node's log.
func (n *turnNode) turnEndedSince(mark int, seat, subject string) map[string]any {
	n.t.Helper()
	started := n.logs.waitSince(n.t, mark, map[string]any{"msg": "turn_started", "seat": seat, "about": contains(subject)})
	return n.logs.waitSince(n.t, mark, map[string]any{"msg": "turn_ended", "seat": seat, "turn": started["turn"]})
}

var itemKeyRe = regexp.MustCompile(`[A-Z][A-Z0-9]+-[0-9]+`)

// itemOf is the work item a conversation's trigger names.
func itemOf(c modeltest.Conversation) string {
	return itemKeyRe.FindString(c.UserText())
}

const company = `
providers:
  fake: {api: openai, base_url: "{{MODEL}}/v1", api_key: "${MODEL_KEY}"}
models:
  default: {provider: fake, model: m-1}
units:
  - id: core
    name: Core
    lead: ada
    project: CORE
    space: CORE
    roles:
      - {name: Ada, handle: ada, kind: human, admin: true}
      - {name: Bob, handle: bob, kind: human}
      - {name: Assistant, handle: assistant, instructions: "Answer on the item you were asked on."}
api:
  auth:
    tokens:
      - {id: ada, token: "${ADA_TOKEN}", seat: ada}
      - {id: bob, token: "${BOB_TOKEN}", seat: bob}
`

var env = map[string]string{"ADA_TOKEN": "ada-token-0123456789", "BOB_TOKEN": "bob-token-0123456789", "MODEL_KEY": "sk-model-key-4242"}
