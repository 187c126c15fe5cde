package servers

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A direct call answers what a call over a connection answers, for the same
// caller: the same result, refusals and the schema's verdicts included.
func TestDirectCallAnswersWhatTheConnectionAnswers(t *testing.T) {
	trust, direct := InProcess()
	cs := connect(t, trust)
	for _, args := range []string{
		`{"text":"hi"}`, `{}`, `{"text":7}`, `{"text":"a","bogus":1}`, `{"text":"zed","mode":"missing"}`,
		`{"text":"x","mode":"broken"}`, `{"text":"a\u0001b"}`, `null`, ``,
	} {
		var a any
		if args != "" {
			a = json.RawMessage(args)
		}
		wire, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: a, Meta: CallerMeta(ada, direct.Proof())})
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := direct.Call(context.Background(), ada, "echo", json.RawMessage(args))
		if !ok || err != nil {
			t.Fatalf("%s: direct call %v %v", args, ok, err)
		}
		if w, g := withoutHop(jsonOf(t, wire)), jsonOf(t, got); !reflect.DeepEqual(w, g) {
			t.Errorf("%s:\nover the connection: %v\ndirect:              %v", args, w, g)
		}
	}
	if _, ok, _ := direct.Call(context.Background(), ada, "not_registered", nil); ok {
		t.Fatal("a tool the kit did not register was called directly")
	}
	// The caller is judged as over a connection: one that is no caller is
	// refused.
	res, _, _ := direct.Call(context.Background(), authority.Caller{Seat: "x", Kind: "robot"}, "echo", json.RawMessage(`{"text":"hi"}`))
	if c, _ := ClassOf(res); c != authority.Forbidden {
		t.Fatalf("invalid caller: class %q", c)
	}
}

// A server made with a trust from InProcessTrust files nothing for a
// direct call; only InProcess does.
func TestOnlyInProcessTrustFilesDirectHandlers(t *testing.T) {
	trust, _ := InProcessTrust()
	if trust.direct != nil {
		t.Fatal("InProcessTrust made a trust that files handlers")
	}
}

// withoutHop drops what the connection's own revision adds to a result:
// the mark that it is complete and the server's name in _meta, which
// describe the hop, not the answer (the hub drops the name too).
func withoutHop(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	delete(m, "resultType")
	if meta, ok := m["_meta"].(map[string]any); ok {
		delete(meta, "io.modelcontextprotocol/serverInfo")
		if len(meta) == 0 {
			delete(m, "_meta")
		}
	}
	return m
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
