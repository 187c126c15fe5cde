package hub

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzTransparency's spellings (issue 36, findings 7 and 8): each input
// also makes a spelling (deriveSpelling) of what names a call, which a
// raw client writes as no go-sdk client would, through the hub's fast
// path and the SDK's, on a session revision and on 2026-07-28:
//
//   - the call's id comes back as the SDK writes it, the same on both
//     paths (an integer past 2^53 as the float64 the SDK read it as);
//   - its progress token comes back on every progress notification as
//     the client wrote it (9007199254740993, 1e2, "a\u0062"), on both;
//   - on a session, the call is held open by its server's question to
//     the client, the client sends the spelled notifications/cancelled,
//     and the call is cancelled on both paths exactly when the SDK reads
//     the message as naming it (spelling.cancels); otherwise the client
//     answers the question and the call finishes.
//
// Each is an event the client waits for: an answer, or (a cancellation
// the hub ignored) the broken answer of a server that gave up waiting
// for the client, which the comparison then shows.

// spellScript is the answer the scripted session server gives the
// spelled calls: progress, then a result; asking, the question first.
func spellScript(asking bool) *script {
	sc := &script{sse: true, member: "result", body: []byte(`{"content":[{"type":"text","text":"spelled"}]}`),
		notes: []note{{method: "notifications/progress", params: []byte(`"progress":1,"total":2,"message":"one"}`)}}}
	if asking {
		// Unless the client answers, the server gives no answer: a call
		// the hub cancelled ends as cancelled, never by a race with the
		// server's answer to the hub's refusal of its question.
		sc.hold = true
		sc.notes = append(sc.notes, note{method: "elicitation/create",
			params: []byte(`{"message":"spelled?","requestedSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`)})
	}
	return sc
}

// spellView is what the raw client read of a spelled call.
type spellView struct {
	ID     string   // the answer's id, as written
	Tokens []string // each progress notification's token, as written
	Asked  int      // questions the client was asked
	Answer any      // the answer's result or error
}

// spellings checks the input's spelling on both paths.
func (rig *transparencyRig) spellings(t *testing.T, data []byte) {
	sp := deriveSpelling(data)
	s := rig.servers[0] // the session revision's HTTP server
	if rig.raw == nil {
		rig.raw = newRawClient(t, rig.endpoint)
	}
	defer rig.hub.operator.noFast.Store(false)
	for _, modern := range []bool{false, true} {
		var views [2]spellView
		for i, fast := range []bool{true, false} {
			rig.hub.operator.noFast.Store(!fast)
			views[i] = rig.raw.call(t, s, sp, modern, false)
			if want := writtenTokens(sp.token, len(views[i].Tokens)); !reflect.DeepEqual(views[i].Tokens, want) {
				t.Errorf("spelling %+v, modern=%v fast=%v: progress tokens came back as %q, not as written (%q)", sp, modern, fast, views[i].Tokens, want)
			}
			if sp.token != "" && len(views[i].Tokens) == 0 {
				t.Errorf("spelling %+v, modern=%v fast=%v: no progress came back", sp, modern, fast)
			}
		}
		if !reflect.DeepEqual(views[0], views[1]) {
			t.Errorf("spelling %+v, modern=%v: the fast path read\n%+v\nthe SDK's\n%+v", sp, modern, views[0], views[1])
		}
	}
	var views [2]spellView
	for i, fast := range []bool{true, false} {
		rig.hub.operator.noFast.Store(!fast)
		views[i] = rig.raw.call(t, s, sp, false, true)
		res, _ := views[i].Answer.(map[string]any)
		cancelled := strings.Contains(fmt.Sprint(res["content"]), "was cancelled by its caller")
		if cancelled != sp.cancels {
			t.Errorf("spelling %+v, fast=%v: cancelled=%v, but the SDK reads %s as cancelling it: %v; answer %+v", sp, fast, cancelled, sp.cancel, sp.cancels, views[i])
		}
	}
	if !reflect.DeepEqual(views[0], views[1]) {
		t.Errorf("spelling %+v cancelled: the fast path read\n%+v\nthe SDK's\n%+v", sp, views[0], views[1])
	}
}

// writtenTokens is n progress tokens as the client wrote token.
func writtenTokens(token string, n int) []string {
	if token == "" {
		return nil
	}
	var b bytes.Buffer
	_ = json.Compact(&b, []byte(token))
	out := make([]string, n)
	for i := range out {
		out[i] = b.String()
	}
	return out
}

// rawClient writes JSON-RPC to the hub by hand: a 2025-11-25 session,
// and 2026-07-28 requests that carry their own revision.
type rawClient struct {
	endpoint string
	session  string
}

func newRawClient(tb testing.TB, endpoint string) *rawClient {
	tb.Helper()
	c := &rawClient{endpoint: endpoint}
	resp := c.post(tb, false, nil, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"elicitation":{}},"clientInfo":{"name":"spelling","version":"0"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c.session = resp.Header.Get("Mcp-Session-Id"); c.session == "" {
		tb.Fatalf("initialize opened no session: %s", resp.Status)
	}
	resp = c.post(tb, false, nil, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	return c
}

// post sends body, on the session or as a 2026-07-28 request with headers.
func (c *rawClient) post(tb testing.TB, modern bool, headers map[string]string, msg string) *http.Response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, c.endpoint, strings.NewReader(msg))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adaTok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if modern {
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	} else if c.session != "" {
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	// Bounded: a hub that lost a call must fail the input, not hang it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		tb.Fatalf("POST %s: %v", clipTo(msg, 200), err)
	}
	body := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{body, closerFunc(func() error { defer cancel(); return body.Close() })}
	return resp
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// call makes the spelled call of s's tool and reads its stream to the
// answer. asking holds the call open with a question, then sends the
// spelled cancellation and, unless it cancels, answers the question.
func (c *rawClient) call(t *testing.T, s *rigServer, sp spelling, modern, asking bool) spellView {
	t.Helper()
	key := "k" + strconv.FormatInt(callKeys.Add(1), 10)
	s.scripts.set(key, spellScript(asking))
	defer s.scripts.drop(key)
	meta := ""
	if sp.token != "" {
		meta = `"progressToken":` + sp.token
	}
	var headers map[string]string
	if modern {
		if meta != "" {
			meta += ","
		}
		meta += `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"spelling","version":"0"}`
		headers = map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": s.tool}
	}
	body := `{"jsonrpc":"2.0","id":` + sp.id + `,"method":"tools/call","params":{"name":"` + s.tool + `","arguments":{"key":"` + key + `"}` +
		`,"_meta":{` + meta + `}}}`
	resp := c.post(t, modern, headers, body)
	defer resp.Body.Close()
	var v spellView
	for msg := range readMessages(resp) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("an unreadable message %s: %v", clipTo(string(msg), 300), err)
		}
		switch {
		case m.Method == "notifications/progress":
			v.Tokens = append(v.Tokens, string(m.Params.ProgressToken))
		case m.Method == "elicitation/create":
			v.Asked++
			cancel := c.post(t, false, nil, sp.cancel)
			_, _ = io.Copy(io.Discard, cancel.Body)
			cancel.Body.Close()
			if !sp.cancels {
				answer := c.post(t, false, nil, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"action":"decline"}}`)
				answer.Body.Close()
			}
		case m.Method != "":
		case m.Error != nil:
			v.ID, v.Answer = string(m.ID), map[string]any{"error": canonical(m.Error)}
		default:
			v.ID, v.Answer = string(m.ID), canonical(m.Result)
		}
	}
	return v
}

// readMessages reads a POST's answer, an event stream or one JSON
// message, to its end, as JSON-RPC messages, calling on each as it comes.
func readMessages(resp *http.Response) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(resp.Body)
			if len(bytes.TrimSpace(b)) > 0 {
				yield(b)
			}
			return
		}
		r := bufio.NewReader(resp.Body)
		var data []byte
		for {
			line, err := r.ReadBytes('\n')
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case bytes.HasPrefix(line, []byte("data: ")):
				data = append(data, line[len("data: "):]...)
			case len(line) == 0 && len(data) > 0:
				if !yield(data) {
					return
				}
				data = nil
			}
			if err != nil {
				return
			}
		}
	}
}

// Issue 36, findings 7 and 8: FuzzTransparency's corpus holds each case
// the issue found, as a spelling an input makes: ids and tokens past 2^53
// and 1e2, and cancellations by 5.0, by "a\u0062" for "ab", by an escaped
// method (which the SDK honours), and by "METHOD" or "Params"/"RequestID"
// (which it does not).
func TestTransparencyCorpusSpellsTheIssuesCases(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzTransparency")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var spelled []spelling
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lit, ok := strings.CutPrefix(strings.TrimSpace(string(raw)), "go test fuzz v1\n[]byte(")
		data, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if !ok || err != nil {
			t.Fatalf("%s: not a corpus file of one []byte: %v", e.Name(), err)
		}
		spelled = append(spelled, deriveSpelling([]byte(data)))
	}
	for what, is := range map[string]func(spelling) bool{
		"an id and a token past 2^53": func(sp spelling) bool {
			return sp.id == `9007199254740993` && sp.token == `9007199254740993`
		},
		"an 18-digit token": func(sp spelling) bool { return sp.token == `123456789012345678` },
		"a token 1e2":       func(sp spelling) bool { return sp.token == `1e2` },
		"requestId 5.0 for the call 5": func(sp spelling) bool {
			return sp.id == `5` && sp.cancels && strings.Contains(sp.cancel, `"requestId":5.0,`)
		},
		`requestId "a\u0062" for "ab"`: func(sp spelling) bool {
			return sp.id == `"ab"` && sp.cancels && strings.Contains(sp.cancel, `"a\u0062"`)
		},
		"an escaped method": func(sp spelling) bool { return sp.cancels && strings.Contains(sp.cancel, `"notifications\/cancelled"`) },
		"a METHOD key": func(sp spelling) bool {
			return !sp.cancels && strings.Contains(sp.cancel, `"METHOD":"notifications/cancelled"`)
		},
		"Params and RequestID keys": func(sp spelling) bool {
			return sp.id == `5` && !sp.cancels && strings.Contains(sp.cancel, `"Params":{"RequestID":5,`)
		},
	} {
		if !slices.ContainsFunc(spelled, is) {
			t.Errorf("no input of the corpus spells %s", what)
		}
	}
}
