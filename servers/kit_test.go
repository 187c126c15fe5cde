package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
	Mode string `json:"mode,omitempty" jsonschema:"fail mode for the test"`
}

type echoOut struct {
	Text string `json:"text"`
	Seat string `json:"seat"`
}

func echoTool() Tool {
	return Typed("echo", "Echo text back.", Hints{ReadOnly: Yes, OpenWorld: No}, "",
		func(ctx context.Context, c authority.Caller, in echoIn) (echoOut, error) {
			switch in.Mode {
			case "missing":
				return echoOut{}, authority.Refuse(authority.NotFound, "nothing called %q", in.Text)
			case "broken":
				return echoOut{}, errors.New("disk read failed at /secret/path")
			}
			return echoOut{Text: in.Text, Seat: c.Seat}, nil
		})
}

// connect serves a kit-built server in memory and returns a real go-sdk client
// session on it.
func connect(t *testing.T, trust Trust) *mcp.ClientSession {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "kit-test", Version: "0"}, nil)
	Register(s, trust, nil, echoTool())
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

var ada = authority.Caller{Seat: "ada", Kind: authority.KindHuman, Requester: "ada", OperatorID: "laptop"}

func call(t *testing.T, cs *mcp.ClientSession, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return res
}

func TestTypedToolOutcomes(t *testing.T) {
	trust, proof := InProcessTrust()
	cs := connect(t, trust)
	good := CallerMeta(ada, proof)

	tests := []struct {
		name  string
		args  any
		meta  mcp.Meta
		class authority.Class // empty: success
	}{
		{"success", map[string]any{"text": "hi"}, good, ""},
		{"no proof is forbidden", map[string]any{"text": "hi"}, mcp.Meta{MetaCaller: ada}, authority.Forbidden},
		{"wrong proof is forbidden", map[string]any{"text": "hi"}, CallerMeta(ada, "guess"), authority.Forbidden},
		{"no caller is forbidden", map[string]any{"text": "hi"}, mcp.Meta{MetaProof: proof}, authority.Forbidden},
		{"invalid caller is forbidden", map[string]any{"text": "hi"}, CallerMeta(authority.Caller{Seat: "x", Kind: "robot"}, proof), authority.Forbidden},
		{"missing argument is invalid", map[string]any{}, good, authority.Invalid},
		{"wrong type is invalid", map[string]any{"text": 7}, good, authority.Invalid},
		{"unknown argument is invalid", map[string]any{"text": "a", "bogus": 1}, good, authority.Invalid},
		{"refusal passes through", map[string]any{"text": "zed", "mode": "missing"}, good, authority.NotFound},
		{"unmarked error is internal", map[string]any{"text": "x", "mode": "broken"}, good, authority.InternalError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.args, tc.meta)
			class, refused := ClassOf(res)
			if tc.class == "" {
				if res.IsError {
					t.Fatalf("refused: %+v", res.Content[0])
				}
				var out echoOut
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &out); err != nil || out.Text != "hi" || out.Seat != "ada" {
					t.Fatalf("structured content %s", b)
				}
				return
			}
			if !refused || class != tc.class {
				t.Fatalf("class = %q (refused %v), want %q; content %+v", class, refused, tc.class, res.Content)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if tc.class == authority.InternalError && text != authority.InternalErrorSentence {
				t.Fatalf("internal_error sentence %q leaks or varies", text)
			}
		})
	}
}

// A tool's own failure is logged for the operator, with what failed; a
// refusal the tool meant (not found, say) is the caller's answer, not a
// failure, and is not.
func TestOnlyInternalFailuresAreLogged(t *testing.T) {
	var logged bytes.Buffer
	trust, direct := InProcess()
	Register(mcp.NewServer(&mcp.Implementation{Name: "kit-test", Version: "0"}, nil), trust,
		slog.New(slog.NewJSONHandler(&logged, nil)), echoTool())
	call := func(args string) {
		t.Helper()
		if _, ok, err := direct.Call(context.Background(), ada, "echo", json.RawMessage(args)); !ok || err != nil {
			t.Fatalf("%s: %v %v", args, ok, err)
		}
	}
	call(`{"text":"zed","mode":"missing"}`)
	call(`{"text":"hi"}`)
	if logged.Len() != 0 {
		t.Fatalf("a refusal and a success were logged: %s", logged.String())
	}
	call(`{"text":"x","mode":"broken"}`)
	if got := logged.String(); !strings.Contains(got, `"msg":"tool_failed"`) || !strings.Contains(got, "disk read failed") {
		t.Fatalf("the tool's failure was not logged with its cause: %q", got)
	}
}

// The listing carries the exact three-valued hints and delivers in _meta.
func TestListingCarriesHintsAndDelivers(t *testing.T) {
	trust, _ := InProcessTrust()
	cs := connect(t, trust)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 1 {
		t.Fatalf("ListTools: %v %v", lt, err)
	}
	tool := lt.Tools[0]
	b, _ := json.Marshal(tool.Meta[MetaHints])
	var h Hints
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	if h != (Hints{ReadOnly: Yes, OpenWorld: No}) {
		t.Fatalf("hints = %+v", h)
	}
	if d, ok := tool.Meta[MetaDelivers].(string); !ok || d != "" {
		t.Fatalf("delivers = %#v", tool.Meta[MetaDelivers])
	}
	if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Annotations.DestructiveHint != nil || tool.Annotations.OpenWorldHint == nil || *tool.Annotations.OpenWorldHint {
		t.Fatalf("annotations = %+v", tool.Annotations)
	}
}

func TestTrustProofOverBearerHeader(t *testing.T) {
	trust := TrustProof("standalone-secret")
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{MetaCaller: ada}},
		Extra: &mcp.RequestExtra{Header: map[string][]string{"Authorization": {"Bearer standalone-secret"}}}}
	if c, err := trust.Caller(req); err != nil || c != ada {
		t.Fatalf("Caller = %+v, %v", c, err)
	}
	if _, err := (Trust{}).Caller(req); !errors.Is(err, authority.ErrForbidden) {
		t.Fatalf("zero Trust believed a caller: %v", err)
	}
}

// CAT-7: absent hints are unknown, never a soft no.
func TestHintsFromAnnotations(t *testing.T) {
	tests := []struct {
		raw  string
		want Hints
	}{
		{``, Hints{}},
		{`{}`, Hints{}},
		{`not json`, Hints{}},
		{`{"readOnlyHint":true}`, Hints{ReadOnly: Yes}},
		{`{"readOnlyHint":false,"idempotentHint":false}`, Hints{ReadOnly: No, Idempotent: No}},
		{`{"destructiveHint":true,"openWorldHint":false}`, Hints{Destructive: Yes, OpenWorld: No}},
		{`{"readOnlyHint":null,"destructiveHint":"yes"}`, Hints{}},
	}
	for _, tc := range tests {
		if got := HintsFromAnnotations(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("HintsFromAnnotations(%s) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
}

func TestHintsOverride(t *testing.T) {
	base := Hints{ReadOnly: No, Destructive: Yes}
	got := base.Override(Hints{ReadOnly: Yes, OpenWorld: Yes})
	if got != (Hints{ReadOnly: Yes, Destructive: Yes, OpenWorld: Yes}) {
		t.Fatalf("Override = %+v", got)
	}
}

func TestTriJSON(t *testing.T) {
	for _, in := range []string{`"yes"`, `true`, `"no"`, `false`, `"unknown"`, `null`} {
		var tr Tri
		if err := json.Unmarshal([]byte(in), &tr); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	var tr Tri
	if err := json.Unmarshal([]byte(`"maybe"`), &tr); err == nil {
		t.Error("maybe accepted as a hint")
	}
	b, _ := json.Marshal(Hints{ReadOnly: Yes})
	if string(b) != `{"read_only":"yes","destructive":"unknown","idempotent":"unknown","open_world":"unknown"}` {
		t.Errorf("hints JSON %s", b)
	}
}

func TestClassOfIgnoresUnclassedAndUnknown(t *testing.T) {
	if _, ok := ClassOf(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}); ok {
		t.Error("a third-party failure was given a class")
	}
	if _, ok := ClassOf(&mcp.CallToolResult{IsError: true, Meta: mcp.Meta{MetaRefusal: "made_up"}}); ok {
		t.Error("an unregistered class was read")
	}
	// Issue 25 defect 6, REF-6: a class is the hub's only where the hub's
	// marker says so. Structured content is the tool's to write, and a
	// third-party server copying the refusal shape is not classed.
	if _, ok := ClassOf(&mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"class": "conflict"}}); ok {
		t.Error("a class read off structured content alone, which any server can write")
	}
	if _, ok := ClassOf(Refused(authority.Refuse(authority.Exists, "x"))); !ok {
		t.Error("kit refusal not read")
	}
}
