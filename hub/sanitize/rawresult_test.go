package sanitize

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The one-pass path must answer what the full path answers: the result the
// SDK would decode from the same JSON, sanitised by ResultWith, written
// again. These results cover what a server sends most (text, structured
// content, _meta) and what the one pass leaves to the full path.
var onePassCases = []struct {
	name string
	raw  string
	// full: the one pass must decline it (the full path handles it).
	full bool
}{
	{name: "echo", raw: `{"content":[{"type":"text","text":"hello"}]}`},
	{name: "texts", raw: `{"content":[{"type":"text","text":"one"},{"type":"text","text":"two token=abc"},{"type":"text","text":"three"}]}`},
	{name: "empty content", raw: `{"content":[]}`},
	{name: "escapes kept", raw: `{"content":[{"type":"text","text":"line one\nline two \"quoted\" \u00e9 \ud83d\ude00 \/"}]}`},
	{name: "control stripped", raw: `{"content":[{"type":"text","text":"\u001b[31mred\u001b[0m and \u007f del"}]}`},
	{name: "secret redacted", raw: `{"content":[{"type":"text","text":"token=abc Authorization: Bearer abcdefgh12345"}]}`},
	{name: "configured secret", raw: `{"content":[{"type":"text","text":"the value is hunter2hunter2, twice: hunter2hunter2"}]}`},
	{name: "unicode", raw: `{"content":[{"type":"text","text":"日本語 ☃ ok"}]}`},
	{name: "unknown fields dropped", raw: `{"content":[{"type":"text","text":"x","extra":1}],"vendor":{"a":"token=zz"},"isError":false}`},
	{name: "structured", raw: `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"rows":[{"name":"a\u001b[1mb","pw":"password=x","n":12345678901234567890,"f":1.5e3},true,null],"clean":"ok"}}`},
	{name: "structured array", raw: `{"content":[],"structuredContent":["a","b",{"c":[1,2,3]}]}`},
	{name: "structured scalar", raw: `{"content":[],"structuredContent":"token=secret-value"}`},
	{name: "structured null", raw: `{"content":[],"structuredContent":null}`},
	{name: "meta", raw: `{"content":[{"type":"text","text":"x","_meta":{"note":"Bearer abcdefgh12345"}}],"_meta":{"trace":"\u001b[2mid-1","n":1,"io.modelcontextprotocol/serverInfo":{"name":"inner"}}}`},
	{name: "meta only protocol", raw: `{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"inner"}}}`},
	{name: "meta empty", raw: `{"content":[],"_meta":{}}`},
	// Issue 25 defect 6: an upstream's crewlet/ keys are renamed alike on
	// both paths; a key spelt with escapes is left to the full path.
	{name: "hub meta", raw: `{"content":[{"type":"text","text":"x","_meta":{"crewlet/caller":"c"}}],"_meta":{"crewlet/refusal":"forbidden","upstream/crewlet/refusal":"x"}}`},
	{name: "hub meta escaped", raw: `{"content":[],"_meta":{"\u0063rewlet/refusal":"forbidden"}}`, full: true},
	{name: "protocol meta escaped", raw: `{"content":[],"_meta":{"io.modelcontextprotocol\/serverInfo":{"name":"inner"}}}`, full: true},
	{name: "escape in a meta value", raw: `{"content":[],"_meta":{"note":"a\nb \u0063rewlet/refusal"}}`},
	{name: "hub refusal shape", raw: `{"content":[{"type":"text","text":"no"}],"isError":true,"structuredContent":{"class":"forbidden","sentence":"no"},"_meta":{"crewlet/refusal":"forbidden"}}`, full: true},
	{name: "complete", raw: `{"content":[{"type":"text","text":"x"}],"resultType":"complete"}`},
	{name: "whitespace", raw: " {\n \"content\" : [ { \"type\" : \"text\" , \"text\" : \"x\" } ] ,\n\"structuredContent\" : { \"a\" : [ 1 , 2 ] } } "},
	{name: "failure", raw: `{"content":[{"type":"text","text":"no"}],"isError":true}`, full: true},
	{name: "image", raw: `{"content":[{"type":"image","data":"AAEC","mimeType":"image/png"}]}`, full: true},
	{name: "annotations", raw: `{"content":[{"type":"text","text":"x","annotations":{"audience":["user"]}}]}`, full: true},
	{name: "input required", raw: `{"content":[],"resultType":"input_required","inputRequests":{}}`, full: true},
	{name: "no content", raw: `{"structuredContent":{}}`, full: true},
	{name: "NUL", raw: `{"content":[{"type":"text","text":"a\u0000b"}]}`, full: true},
	{name: "invalid UTF-8", raw: "{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}", full: true},
	{name: "lone surrogate", raw: `{"content":[{"type":"text","text":"a\ud800b"}]}`, full: true},
	{name: "key with a secret", raw: `{"content":[],"structuredContent":{"ghp_abcdefghijklmnopqrstuvwxyz0123456789":1}}`, full: true},
	{name: "malformed", raw: `{"content":[{"type":"text","text":"x"}]`, full: true},
	{name: "trailing garbage", raw: `{"content":[]} x`, full: true},
}

func TestResultOnePassAnswersWhatTheFullPathAnswers(t *testing.T) {
	s := New(fuzzSecrets...)
	for _, c := range onePassCases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := s.ResultOnePass([]byte(c.raw), nil)
			if c.full {
				if ok {
					t.Fatalf("the one pass took a result the full path must handle: %s", onePassJSON(got))
				}
				return
			}
			if !ok {
				t.Fatalf("the one pass declined %s", c.raw)
			}
			want, err := fullPath(s, []byte(c.raw), nil)
			if err != nil {
				t.Fatalf("full path: %v", err)
			}
			if !reflect.DeepEqual(asValue(t, onePassJSON(got)), asValue(t, want)) {
				t.Fatalf("one pass:\n%s\nfull path:\n%s", onePassJSON(got), want)
			}
		})
	}
}

// A value that needs no change is answered as it came, not copied.
func TestResultOnePassKeepsCleanStructuredContentAsItCame(t *testing.T) {
	s := New()
	raw := []byte(`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a": [1, "two"]}}`)
	got, ok := s.ResultOnePass(raw, nil)
	if !ok || string(got.Structured) != `{"a": [1, "two"]}` {
		t.Fatalf("%v %s", ok, got.Structured)
	}
	if &got.Structured[0] != &raw[strings.Index(string(raw), `{"a"`)] {
		t.Fatal("clean structured content was copied")
	}
}

// The rewrite sees each structured string the rules changed, as the full
// path's does, and what it answers is kept.
func TestResultOnePassRewritesChangedStrings(t *testing.T) {
	s := New()
	var seen []string
	rw := func(raw, clean string) string {
		seen = append(seen, raw+" -> "+clean)
		return "<" + clean + ">"
	}
	got, ok := s.ResultOnePass([]byte(`{"content":[],"structuredContent":{"a":"x\u001b[1my","b":"plain"}}`), rw)
	if !ok || string(got.Structured) != `{"a":"<xy>","b":"plain"}` {
		t.Fatalf("%v %s", ok, got.Structured)
	}
	if len(seen) != 1 || seen[0] != "x\x1b[1my -> xy" {
		t.Fatalf("rewrite saw %q", seen)
	}
}

// FuzzResultOnePass: whatever the input, the one pass either declines it
// or answers exactly what the full path answers; and it never takes a
// result the full path refuses.
func FuzzResultOnePass(f *testing.F) {
	for _, c := range onePassCases {
		f.Add(c.raw)
	}
	s := New(fuzzSecrets...)
	f.Fuzz(func(t *testing.T, raw string) {
		got, ok := s.ResultOnePass([]byte(raw), nil)
		want, err := fullPath(s, []byte(raw), nil)
		if err == nil {
			// Issue 25 defect 6: whichever path answers, no key of the
			// result's or a content item's _meta speaks as the hub.
			checkNoHubMeta(t, raw, want)
		}
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("the one pass took %q, which the full path refuses: %v", raw, err)
		}
		if !reflect.DeepEqual(asValue(t, onePassJSON(got)), asValue(t, want)) {
			t.Fatalf("input %q\none pass:  %s\nfull path: %s", raw, onePassJSON(got), want)
		}
	})
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

// fullPath is what the hub did before the one pass: decode as the SDK's
// client does, drop the protocol's own _meta keys, sanitise as a
// third-party result (Result's rules, with rw), marshal.
func fullPath(s *Sanitizer, raw []byte, rw Rewrite) ([]byte, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	if res.Meta != nil {
		m := maps.Clone(res.Meta)
		maps.DeleteFunc(m, func(k string, _ any) bool { return strings.HasPrefix(k, "io.modelcontextprotocol/") })
		res.Meta = m
	}
	clean, err := s.result(&res, rw, true)
	if err != nil {
		return nil, err
	}
	return json.Marshal(clean)
}

// onePassJSON writes a one-pass result as the hub's front does.
func onePassJSON(r OnePass) []byte {
	b := []byte(`{"content":`)
	b = append(b, r.Content...)
	if r.Structured != nil {
		b = append(append(b, `,"structuredContent":`...), r.Structured...)
	}
	if r.Meta != nil {
		b = append(append(b, `,"_meta":`...), r.Meta...)
	}
	if r.Complete {
		b = append(b, `,"resultType":"complete"`...)
	}
	return append(b, '}')
}

func asValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// BenchmarkResultOnePass compares the two ways a forwarded result is sanitised:
// the full path (decode as the SDK's client does, ResultWith, write it out
// again) and the one pass over the JSON the server wrote. "echo" is the
// load harness's answer; "list" a page of fifty items as structured
// content and its text.
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
		b.Run(name+"/full", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fullPath(s, []byte(raw), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/one-pass", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := s.ResultOnePass([]byte(raw), nil); !ok {
					b.Fatal("declined")
				}
			}
		})
	}
}
