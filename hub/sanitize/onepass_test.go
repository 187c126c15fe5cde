package sanitize

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// onePassCases are results as servers write them, and what a client must
// read of each once sanitised (as JSON, compared as values), or the error
// it must be refused with. Each case the one pass used to leave to a
// second, decoding walk is answered here by the one walk.
var onePassCases = []struct {
	name string
	raw  string
	want string // the result a client reads; "" with err
	err  string // a substring of the error; "malformed": ErrMalformed
}{
	{name: "echo", raw: `{"content":[{"type":"text","text":"hello"}]}`,
		want: `{"content":[{"type":"text","text":"hello"}]}`},
	{name: "texts", raw: `{"content":[{"type":"text","text":"one"},{"type":"text","text":"two token=abc"}]}`,
		want: `{"content":[{"type":"text","text":"one"},{"type":"text","text":"two token=[REDACTED]"}]}`},
	{name: "empty content", raw: `{"content":[]}`, want: `{"content":[]}`},
	{name: "no content", raw: `{"structuredContent":{}}`, want: `{"content":[],"structuredContent":{}}`},
	{name: "null result", raw: `null`, want: `{"content":[]}`},
	{name: "null content", raw: `{"content":null,"isError":null,"_meta":null,"resultType":null}`, want: `{"content":[]}`},
	{name: "escapes read", raw: `{"content":[{"type":"text","text":"line one\nline two \"quoted\" \u00e9 \ud83d\ude00 \/"}]}`,
		want: `{"content":[{"type":"text","text":"line one\nline two \"quoted\" é 😀 /"}]}`},
	{name: "control stripped", raw: `{"content":[{"type":"text","text":"\u001b[31mred\u001b[0m and \u007f del"}]}`,
		want: `{"content":[{"type":"text","text":"red and  del"}]}`},
	{name: "configured secret", raw: `{"content":[{"type":"text","text":"the value is hunter2hunter2"}]}`,
		want: `{"content":[{"type":"text","text":"the value is [REDACTED]"}]}`},
	{name: "unknown members dropped", raw: `{"content":[{"type":"text","text":"x","extra":1,"Text":"y"}],"vendor":{"a":"token=zz"},"isError":false}`,
		want: `{"content":[{"type":"text","text":"x"}]}`},
	{name: "structured", raw: `{"content":[],"structuredContent":{"rows":[{"name":"a\u001b[1mb","pw":"password=x","n":12345678901234567890},true,null]}}`,
		want: `{"content":[],"structuredContent":{"rows":[{"name":"ab","pw":"password=[REDACTED]","n":12345678901234567890},true,null]}}`},
	{name: "structured scalar", raw: `{"content":[],"structuredContent":"token=secret-value"}`,
		want: `{"content":[],"structuredContent":"token=[REDACTED]"}`},
	{name: "structured null", raw: `{"content":[],"structuredContent":null}`, want: `{"content":[]}`},
	{name: "meta", raw: `{"content":[{"type":"text","text":"x","_meta":{"note":"Bearer abcdefgh12345"}}],"_meta":{"trace":"\u001b[2mid-1","io.modelcontextprotocol/serverInfo":{"name":"inner"}}}`,
		want: `{"content":[{"type":"text","text":"x","_meta":{"note":"Bearer [REDACTED]"}}],"_meta":{"trace":"id-1"}}`},
	{name: "meta only protocol", raw: `{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"inner"}}}`, want: `{"content":[]}`},
	{name: "protocol key escaped", raw: `{"content":[],"_meta":{"io.modelcontextprotocol\/serverInfo":1,"k":2}}`, want: `{"content":[],"_meta":{"k":2}}`},
	{name: "complete", raw: `{"content":[{"type":"text","text":"x"}],"resultType":"complete"}`,
		want: `{"content":[{"type":"text","text":"x"}],"resultType":"complete"}`},
	{name: "whitespace", raw: " {\n \"content\" : [ { \"type\" : \"text\" , \"text\" : \"x\" } ] ,\n\"structuredContent\" : { \"a\" : [ 1 , 2 ] } } ",
		want: `{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":[1,2]}}`},
	// Each of these the one pass used to decline.
	{name: "failure", raw: `{"content":[{"type":"text","text":"no token=abc"}],"isError":true}`,
		want: `{"content":[{"type":"text","text":"no token=[REDACTED]"}],"isError":true}`},
	{name: "image and audio", raw: `{"content":[{"type":"image","data":"AAEC","mimeType":"image/png","annotations":{"priority":0.5}},{"type":"audio","data":"AA\nEC","mimeType":"audio/wav\u0007","_meta":{"k":"token=x"}}]}`,
		want: `{"content":[{"type":"image","data":"AAEC","mimeType":"image/png","annotations":{"priority":0.5}},{"type":"audio","data":"AA\nEC","mimeType":"audio/wav","_meta":{"k":"token=[REDACTED]"}}]}`},
	{name: "resource link", raw: `{"content":[{"type":"resource_link","uri":"https://x.test/f?token=abc","name":"f\u0007.txt","title":"T","description":"d","mimeType":"text/plain","size":12,"icons":[{"src":"https://x.test/i.png","sizes":["48x48"]}],"data":"AAEC"}]}`,
		want: `{"content":[{"type":"resource_link","uri":"https://x.test/f?token=[REDACTED]","name":"f.txt","title":"T","description":"d","mimeType":"text/plain","size":12,"icons":[{"src":"https://x.test/i.png","sizes":["48x48"]}]}]}`},
	{name: "embedded resources", raw: `{"content":[{"type":"resource","resource":{"uri":"file:///n.txt","mimeType":"text/plain","text":"line\u001b]0;t\u0007 hunter2hunter2","_meta":{"crewlet/refusal":"x"}}},{"type":"resource","resource":{"uri":"file:///b","blob":"aHVudGVyMmh1bnRlcjI="}}]}`,
		want: `{"content":[{"type":"resource","resource":{"uri":"file:///n.txt","mimeType":"text/plain","text":"line [REDACTED]","_meta":{"upstream/crewlet/refusal":"x"}}},{"type":"resource","resource":{"uri":"file:///b","blob":"aHVudGVyMmh1bnRlcjI="}}]}`},
	{name: "annotations", raw: `{"content":[{"type":"text","text":"x","annotations":{"audience":["user"],"lastModified":"2025-01-01 token=abc","priority":1}}]}`,
		want: `{"content":[{"type":"text","text":"x","annotations":{"audience":["user"],"lastModified":"2025-01-01 token=[REDACTED]","priority":1}}]}`},
	{name: "type written last", raw: `{"content":[{"text":"a\u0007","data":"AAEC","type":"text"}]}`,
		want: `{"content":[{"type":"text","text":"a"}]}`},
	{name: "type given twice", raw: `{"content":[{"type":"text","text":"a\u0000","type":"image","data":"AAEC"}]}`,
		want: `{"content":[{"type":"image","data":"AAEC"}]}`},
	{name: "escaped keys", raw: `{"c\u006fntent":[{"\u0074ype":"text","t\u0065xt":"x token=abc"}],"_meta":{"\u0063rewlet/refusal":"forbidden"}}`,
		want: `{"content":[{"type":"text","text":"x token=[REDACTED]"}],"_meta":{"upstream/crewlet/refusal":"forbidden"}}`},
	{name: "key with a secret", raw: `{"content":[],"structuredContent":{"ghp_abcdefghijklmnopqrstuvwxyz0123456789":1,"b":{"x\u0007":2}}}`,
		want: `{"content":[],"structuredContent":{"[REDACTED]":1,"b":{"x":2}}}`},
	{name: "invalid UTF-8 reads as a client reads it", raw: "{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}],\"structuredContent\":{\"k\xfe\":\"\xe2\x82\"}}",
		want: `{"content":[{"type":"text","text":"a` + "\ufffd" + `b"}],"structuredContent":{"k` + "\ufffd" + `":"` + "\ufffd\ufffd" + `"}}`},
	{name: "lone surrogate", raw: `{"content":[{"type":"text","text":"a\ud800b"}]}`,
		want: `{"content":[{"type":"text","text":"a` + "\ufffd" + `b"}]}`},
	{name: "input required", raw: `{"content":[],"resultType":"input_required","requestState":"opaque hunter2hunter2","inputRequests":{"r1":{"method":"elicitation/create","params":{"mode":"form","message":"give token=abc","requestedSchema":{"type":"object"}}},"r2":{"method":"sampling/createMessage","params":{"maxTokens":5,"messages":[{"role":"user","content":{"type":"text","text":"hunter2hunter2"}}]}}}}`,
		want: `{"content":[],"resultType":"input_required","requestState":"opaque hunter2hunter2","inputRequests":{"r1":{"method":"elicitation/create","params":{"mode":"form","message":"give token=[REDACTED]","requestedSchema":{"type":"object"}}},"r2":{"method":"sampling/createMessage","params":{"maxTokens":5,"messages":[{"role":"user","content":{"type":"text","text":"[REDACTED]"}}]}}}}`},
	// Refused by the rules.
	{name: "NUL", raw: `{"content":[{"type":"text","text":"ok"},{"type":"text","text":"a\u0000b"}]}`,
		err: "the tool's result held binary data in text content item 1 (a NUL byte at byte 1)"},
	{name: "NUL in a link's name", raw: `{"content":[{"type":"resource_link","uri":"u","name":"n\u0000"}]}`,
		err: "in the name of resource link content item 0 (a NUL byte at byte 1)"},
	{name: "NUL in an embedded resource", raw: `{"content":[{"type":"resource","resource":{"uri":"u","text":"\u0000"}}]}`,
		err: "in the text of embedded resource content item 0 (a NUL byte at byte 0)"},
	{name: "NUL in structured content", raw: `{"content":[],"structuredContent":{"rows":["ok",{"file name":"\u0000"}]}}`,
		err: `in its structured content at $.rows[1]["file name"] (a NUL byte at byte 0)`},
	{name: "NUL in a key", raw: `{"content":[],"structuredContent":{"a":{"k\u0000":1}}}`,
		err: "in a key of its structured content at $.a (a NUL byte at byte 1)"},
	{name: "NUL in an item's _meta", raw: `{"content":[{"type":"image","data":"","_meta":{"k":["\u0000"]}}]}`,
		err: "in the _meta of image content item 0 at $.k[0] (a NUL byte at byte 0)"},
	{name: "a renamed key colliding", raw: `{"content":[],"structuredContent":{"x":{"a\u0007":1,"a":2}}}`,
		err: `two keys in its structured content at $.x that are the same once control characters and secrets are removed ("a")`},
	{name: "tool use", raw: `{"content":[{"type":"text","text":"x"},{"type":"tool_use","id":"1","name":"n","input":{}}]}`,
		err: "held content item 1 of type *mcp.ToolUseContent, which the hub cannot check"},
	// What no client can read.
	{name: "malformed", raw: `{"content":[{"type":"text","text":"x"}]`, err: "malformed"},
	{name: "trailing garbage", raw: `{"content":[]} x`, err: "malformed"},
	{name: "wrong member type", raw: `{"content":[{"type":"text","text":5}]}`, err: "malformed"},
	{name: "wrong type of a member dropped", raw: `{"content":[{"type":"text","text":"x","size":1.5}]}`, err: "malformed"},
	{name: "isError a string", raw: `{"content":[],"isError":"true"}`, err: "malformed"},
	{name: "content an object", raw: `{"content":{"type":"text","text":"x"}}`, err: "malformed"},
	{name: "null item", raw: `{"content":[null]}`, err: "malformed"},
	{name: "unknown content type", raw: `{"content":[{"type":"video","text":"x"}]}`, err: "malformed"},
	{name: "not base64", raw: `{"content":[{"type":"image","data":"AA-_"}]}`, err: "malformed"},
	{name: "_meta an array", raw: `{"content":[],"_meta":[]}`, err: "malformed"},
	{name: "unknown input request", raw: `{"content":[],"inputRequests":{"a":{"method":"x"}}}`, err: "malformed"},
	{name: "deep nesting", raw: `{"content":[],"structuredContent":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, err: "malformed"},
	{name: "a rule's refusal in what no client can read", raw: `{"content":[{"type":"text","text":"\u0000"}],"isError":1}`, err: "malformed"},
}

func TestResultOnePass_OUT1(t *testing.T) {
	s := New(fuzzSecrets...)
	for _, c := range onePassCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.ResultOnePass([]byte(c.raw), nil)
			switch {
			case c.err == "malformed":
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("not refused as malformed: %v %s", err, got.AppendJSON(nil))
				}
				return
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) || errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v\nwant one saying %s", err, c.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			out := got.AppendJSON(nil)
			if !reflect.DeepEqual(asValue(t, out), asValue(t, []byte(c.want))) {
				t.Fatalf("got  %s\nwant %s", out, c.want)
			}
			checkClientReads(t, c.raw, out)
		})
	}
}

// The deepest nesting the SDK reads is read; one more is refused.
func TestResultOnePassNestsAsDeepAsTheSDK(t *testing.T) {
	s := New()
	nest := func(n int) []byte {
		// The result is level 1; structured content's arrays add n.
		return []byte(`{"content":[],"structuredContent":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	for n, ok := range map[int]bool{999: true, 1000: false} {
		var res mcp.CallToolResult
		sdkErr := json.Unmarshal(nest(n), &res)
		_, err := s.ResultOnePass(nest(n), nil)
		if (sdkErr == nil) != ok || (err == nil) != ok {
			t.Errorf("nesting %d: SDK %v, one pass %v", n, sdkErr, err)
		}
	}
}

// A value that needs no change is answered as it came, not copied.
func TestResultOnePassKeepsCleanStructuredContentAsItCame(t *testing.T) {
	s := New()
	raw := []byte(`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a": [1, "two"]}}`)
	got, err := s.ResultOnePass(raw, nil)
	if err != nil || string(got.Structured) != `{"a": [1, "two"]}` {
		t.Fatalf("%v %s", err, got.Structured)
	}
	if &got.Structured[0] != &raw[strings.Index(string(raw), `{"a"`)] {
		t.Fatal("clean structured content was copied")
	}
}

// The rewrite sees each structured string the rules changed, and what it
// answers is kept.
func TestResultOnePassRewritesChangedStrings(t *testing.T) {
	s := New()
	var seen []string
	rw := func(raw, clean string) string {
		seen = append(seen, raw+" -> "+clean)
		return "<" + clean + ">"
	}
	got, err := s.ResultOnePass([]byte(`{"content":[{"type":"text","text":"a\u0007"}],"structuredContent":{"a":"x\u001b[1my","b":"plain"}}`), rw)
	if err != nil || string(got.Structured) != `{"a":"<xy>","b":"plain"}` {
		t.Fatalf("%v %s", err, got.Structured)
	}
	if len(seen) != 1 || seen[0] != "x\x1b[1my -> xy" {
		t.Fatalf("rewrite saw %q", seen)
	}
}

// A first-party result's _meta keys are the hub's words: kept, where a
// third party's are renamed.
func TestFirstPartyOnePassKeepsHubMeta(t *testing.T) {
	s := New()
	raw := []byte(`{"content":[{"type":"text","text":"no","_meta":{"crewlet/caller":"x"}}],"isError":true,"_meta":{"crewlet/refusal":"forbidden"}}`)
	first, err := s.FirstPartyOnePass(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	third, err := s.ResultOnePass(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Meta) != `{"crewlet/refusal":"forbidden"}` || !strings.Contains(string(first.Content), `"crewlet/caller"`) || !first.IsError {
		t.Errorf("first party: %s", first.AppendJSON(nil))
	}
	if string(third.Meta) != `{"upstream/crewlet/refusal":"forbidden"}` || !strings.Contains(string(third.Content), `"upstream/crewlet/caller"`) {
		t.Errorf("third party: %s", third.AppendJSON(nil))
	}
}

// FuzzResultOnePass holds the one walk to what a go-sdk client reads, with
// no second walk to compare against (OUT-1; issue 25 defects 5 and 6):
//   - a result the SDK cannot decode is refused as ErrMalformed, and one
//     it can is never;
//   - what is answered is JSON the SDK decodes, holding no configured
//     secret, no control character and no _meta key that speaks as the hub;
//   - the result reads the same however the server spelt it: its answer
//     equals the answer to the SDK's own writing of the same result;
//   - a result that was already clean comes out as it went in.
func FuzzResultOnePass(f *testing.F) {
	for _, c := range onePassCases {
		f.Add(c.raw)
	}
	for _, c := range foreignMetaCases {
		f.Add(c.raw)
	}
	s := New(fuzzSecrets...)
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := s.ResultOnePass([]byte(raw), nil)
		var res mcp.CallToolResult
		sdkErr := json.Unmarshal([]byte(raw), &res)
		if (sdkErr != nil) != errors.Is(err, ErrMalformed) {
			t.Fatalf("input %q: the SDK says %v; the one pass %v", raw, sdkErr, err)
		}
		if err != nil {
			return
		}
		out := got.AppendJSON(nil)
		checkClientReads(t, raw, out)
		if hasDuplicateKeys([]byte(raw)) {
			// A member given twice reads as the SDK's decoder merges
			// it, which the SDK's own writing does not repeat.
			return
		}
		canonical, err := json.Marshal(&res)
		if err != nil {
			t.Fatalf("input %q: the SDK cannot write what it read: %v", raw, err)
		}
		again, err := s.ResultOnePass(canonical, nil)
		if err != nil {
			t.Fatalf("input %q, as the SDK writes it %s: %v", raw, canonical, err)
		}
		if a, b := sdkView(t, out), sdkView(t, again.AppendJSON(nil)); a != b {
			t.Fatalf("input %q reads otherwise as the SDK writes it:\n%s\n%s", raw, a, b)
		}
		if isClean(s, canonical) {
			if a, b := sdkView(t, out), sdkView(t, withoutProtocolMeta(canonical)); a != b {
				t.Fatalf("clean input %q changed:\n%s\n%s", raw, b, a)
			}
		}
	})
}

// checkClientReads fails unless out is a result the SDK decodes whose
// every string is clean: no configured secret, no control character, and
// (a third party's) no _meta key of the hub's on the result or an item.
func checkClientReads(t *testing.T, input string, out []byte) {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("input %q: the SDK cannot read %s: %v", input, out, err)
	}
	if !utf8.Valid(out) {
		t.Fatalf("input %q: not UTF-8: %q", input, out)
	}
	// The request state is an opaque value the client echoes to the
	// server byte for byte: it passes as it came.
	v := asValue(t, out)
	delete(v.(map[string]any), "requestState")
	eachString(v, func(str string) {
		for _, secret := range fuzzSecrets {
			if strings.Contains(str, secret) {
				t.Fatalf("input %q: %q passed in %s", input, secret, out)
			}
		}
		if firstControl(str) >= 0 {
			t.Fatalf("input %q: a control character passed in %q", input, str)
		}
	})
	checkNoHubMeta(t, input, out)
}

// sdkView is what the SDK reads of a result, as the SDK writes it.
func sdkView(t *testing.T, b []byte) string {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("the SDK cannot read %s: %v", b, err)
	}
	out, err := json.Marshal(&res)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// isClean reports whether a result, as the SDK writes it, holds nothing
// the rules change: every string (keys too) as Text leaves it, no _meta
// key of the hub's and no content the hub cannot check.
func isClean(s *Sanitizer, canonical []byte) bool {
	clean := true
	eachString(asValueOK(canonical), func(str string) {
		if out, err := s.Text(str); err != nil || out != str || strings.HasPrefix(str, HubMetaPrefix) ||
			strings.HasPrefix(str, ForeignMetaPrefix) {
			clean = false
		}
	})
	return clean && !strings.Contains(string(canonical), `"tool_use"`) && !strings.Contains(string(canonical), `"tool_result"`)
}

// withoutProtocolMeta drops the result's io.modelcontextprotocol/ _meta
// keys, which describe the hop and are not passed on.
func withoutProtocolMeta(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["_meta"], &meta) == nil && meta != nil {
		for k := range meta {
			if strings.HasPrefix(k, protocolPrefix) {
				delete(meta, k)
			}
		}
		m["_meta"], _ = json.Marshal(meta)
	}
	out, _ := json.Marshal(m)
	return out
}

func asValueOK(b []byte) any {
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// hasDuplicateKeys reports an object, anywhere in b, that names a key
// twice.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type frame struct {
		keys  map[string]bool
		isObj bool
		key   bool // the next string is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.isObj {
					top.key = true
				}
				stack = append(stack, &frame{keys: map[string]bool{}, isObj: v == '{', key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.isObj && top.key {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.isObj {
			top.key = true
		}
	}
}

// checkNoHubMeta fails if a sanitised third-party result, as JSON, holds a
// _meta key under HubMetaPrefix at its top or on a content item.
func checkNoHubMeta(t *testing.T, input string, out []byte) {
	t.Helper()
	var r struct {
		Meta    map[string]json.RawMessage `json:"_meta"`
		Content []struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"content"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	metas := []map[string]json.RawMessage{r.Meta}
	for _, c := range r.Content {
		metas = append(metas, c.Meta)
	}
	for _, m := range metas {
		for k := range m {
			if strings.HasPrefix(k, HubMetaPrefix) {
				t.Fatalf("input %q: the hub's key %q passed: %s", input, k, out)
			}
		}
	}
}

func asValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// BenchmarkResultOnePass measures the one pass over a forwarded result:
// "echo" is the load harness's answer; "list" a page of fifty items as
// structured content and its text.
func BenchmarkResultOnePass(b *testing.B) {
	var items []string
	for i := range 50 {
		items = append(items, fmt.Sprintf(`{"key":"CORE-%d","id":"01J%020d","project":"CORE","title":"Item number %d: fix the thing","status":"todo","assignee":"ada","priority":"high","labels":["bug","ui"],"version":3,"updated_at":"2026-11-30T12:00:00Z"}`, i, i, i))
	}
	list := `{"items":[` + strings.Join(items, ",") + `]}`
	listText, _ := json.Marshal(list)
	cases := map[string]string{
		"echo": `{"content":[{"type":"text","text":"hello from crewlet-load"}]}`,
		"list": `{"content":[{"type":"text","text":` + string(listText) + `}],"structuredContent":` + list + `}`,
	}
	s := New("configured-secret-01", "configured-secret-02")
	for name, raw := range cases {
		b.Run(name+"/one-pass", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ResultOnePass([]byte(raw), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
