package sanitize

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// binaryBytes is payload data that is not UTF-8 text at all.
var binaryBytes = []byte{0x89, 'P', 'N', 'G', 0x00, 0xff, 0xfe, 0x1b, '[', '3', '1', 'm'}

// fullResult builds a result with every kind of content the hub passes on,
// each carrying something to strip or redact. It is a function so that
// tests can build an identical second copy to compare against.
func fullResult() *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Meta: mcp.Meta{"trace": "\x1b[2mid-1", "n": 1.0},
		Content: []mcp.Content{
			&mcp.TextContent{
				Text:        "\x1b[32mok\x1b[0m token=abc",
				Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5},
				Meta:        mcp.Meta{"note": "Bearer abcdefgh12345"},
			},
			&mcp.ImageContent{Data: slicesClone(binaryBytes), MIMEType: "image/png"},
			&mcp.AudioContent{Data: slicesClone(binaryBytes), MIMEType: "audio/wav"},
			&mcp.ResourceLink{
				URI:         "https://x.test/f?token=abc",
				Name:        "file\x07.txt",
				Title:       "Title " + fakeGitHub,
				Description: "desc\u009b1m",
				MIMEType:    "text/plain",
			},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "file:///notes.txt", MIMEType: "text/plain",
				Text: "line\x1b]0;t\x07 " + fakeSK,
			}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "file:///blob.bin", MIMEType: "application/octet-stream",
				Blob: slicesClone(binaryBytes),
			}},
		},
		StructuredContent: map[string]any{
			"rows":        []any{map[string]any{"name": "a\x1b[1mb", "pw": "password=x"}, 2.0},
			"clean":       "nothing to do",
			fakeGitHub:    "key is a secret",
			"nested_json": json.RawMessage(`{"auth":"Authorization: Basic abc"}`),
		},
		IsError: true,
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// OUT-1: Result sanitises every text field and passes binary content.
func TestResultSanitisesEveryTextField_OUT1(t *testing.T) {
	out, err := New().Result(fullResult())
	if err != nil {
		t.Fatal(err)
	}
	if !out.IsError {
		t.Error("IsError was lost")
	}
	if got, want := toJSON(t, out.Meta), `{"n":1,"trace":"id-1"}`; got != want {
		t.Errorf("_meta = %s, want %s", got, want)
	}

	text := out.Content[0].(*mcp.TextContent)
	if text.Text != "ok token=[REDACTED]" {
		t.Errorf("text = %q", text.Text)
	}
	if text.Meta["note"] != "Bearer [REDACTED]" {
		t.Errorf("text _meta = %v", text.Meta)
	}
	if text.Annotations == nil || text.Annotations.Priority != 0.5 {
		t.Errorf("annotations lost: %+v", text.Annotations)
	}

	img := out.Content[1].(*mcp.ImageContent)
	if !bytes.Equal(img.Data, binaryBytes) || img.MIMEType != "image/png" {
		t.Errorf("image changed: %q %q", img.Data, img.MIMEType)
	}
	audio := out.Content[2].(*mcp.AudioContent)
	if !bytes.Equal(audio.Data, binaryBytes) || audio.MIMEType != "audio/wav" {
		t.Errorf("audio changed: %q %q", audio.Data, audio.MIMEType)
	}

	link := out.Content[3].(*mcp.ResourceLink)
	wantLink := mcp.ResourceLink{
		URI: "https://x.test/f?token=[REDACTED]", Name: "file.txt", Title: "Title [REDACTED]",
		Description: "desc", MIMEType: "text/plain",
	}
	if !reflect.DeepEqual(*link, wantLink) {
		t.Errorf("resource link = %+v\nwant %+v", *link, wantLink)
	}

	res := out.Content[4].(*mcp.EmbeddedResource).Resource
	if res.Text != "line [REDACTED]" || res.URI != "file:///notes.txt" {
		t.Errorf("text resource = %+v", res)
	}
	blob := out.Content[5].(*mcp.EmbeddedResource).Resource
	if !bytes.Equal(blob.Blob, binaryBytes) || blob.Text != "" {
		t.Errorf("blob resource changed: %+v", blob)
	}

	wantSC := `{"[REDACTED]":"key is a secret","clean":"nothing to do",` +
		`"nested_json":{"auth":"Authorization: Basic [REDACTED]"},` +
		`"rows":[{"name":"ab","pw":"password=[REDACTED]"},2]}`
	if got := toJSON(t, out.StructuredContent); got != wantSC {
		t.Errorf("structured content\n got %s\nwant %s", got, wantSC)
	}
	// The whole result must still be what the SDK can send.
	if _, err := json.Marshal(out); err != nil {
		t.Errorf("sanitised result does not marshal: %v", err)
	}
}

// OUT-1: Result never modifies its input, and the copy it returns can be
// changed without reaching back into the input.
func TestResultDoesNotMutateInput_OUT1(t *testing.T) {
	in := fullResult()
	out, err := New(fakeSK).Result(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, fullResult()) {
		t.Fatal("Result modified its input")
	}
	out.Meta["added"] = true
	out.Content[0].(*mcp.TextContent).Text = "changed"
	out.Content[0].(*mcp.TextContent).Annotations.Audience[0] = "assistant"
	out.Content[0].(*mcp.TextContent).Meta["added"] = true
	out.Content[1].(*mcp.ImageContent).MIMEType = "changed"
	out.Content[3].(*mcp.ResourceLink).Name = "changed"
	out.Content[4].(*mcp.EmbeddedResource).Resource.Text = "changed"
	out.Content[0] = nil
	out.StructuredContent.(map[string]any)["rows"].([]any)[0] = "changed"
	if !reflect.DeepEqual(in, fullResult()) {
		t.Fatal("changing Result's copy changed its input")
	}
}

// OUT-1: a text field holding binary data rejects the whole result with a
// sentence naming where and why.
func TestResultRejectsBinaryText_OUT1(t *testing.T) {
	type typed struct {
		Name string `json:"name"`
		Skip string `json:"-"`
	}
	cases := []struct {
		name string
		r    *mcp.CallToolResult
		want string
	}{
		{
			"text content item",
			&mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "fine"}, &mcp.ImageContent{Data: binaryBytes}, &mcp.TextContent{Text: "PNG\xff"},
			}},
			"the tool's result held binary data in text content item 2 (invalid UTF-8 at byte 3); binary data must be sent as image, audio or blob resource content",
		},
		{
			"NUL in text",
			&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a\x00b"}}},
			"the tool's result held binary data in text content item 0 (a NUL byte at byte 1); binary data must be sent as image, audio or blob resource content",
		},
		{
			"embedded text resource",
			&mcp.CallToolResult{Content: []mcp.Content{
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///x", Text: string(binaryBytes)}},
			}},
			"the tool's result held binary data in the text of embedded resource content item 0 (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content",
		},
		{
			"resource link name",
			&mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "x"}, &mcp.ResourceLink{URI: "file:///x", Name: "n\x00"},
			}},
			"the tool's result held binary data in the name of resource link content item 1 (a NUL byte at byte 1); binary data must be sent as image, audio or blob resource content",
		},
		{
			"structured content string",
			&mcp.CallToolResult{StructuredContent: map[string]any{"rows": []any{"ok", map[string]any{"file name": "\xff"}}}},
			`the tool's result held binary data in its structured content at $.rows[1]["file name"] (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content`,
		},
		{
			"structured content key",
			&mcp.CallToolResult{StructuredContent: map[string]any{"a": map[string]any{"k\x00": 1}}},
			"the tool's result held binary data in a key of its structured content at $.a (a NUL byte at byte 1); binary data must be sent as image, audio or blob resource content",
		},
		{
			"structured content NUL from JSON escape",
			&mcp.CallToolResult{StructuredContent: json.RawMessage(`{"data":"\u0000\u0001"}`)},
			"the tool's result held binary data in its structured content at $.data (a NUL byte at byte 0); binary data must be sent as image, audio or blob resource content",
		},
		{
			"raw JSON with invalid UTF-8",
			&mcp.CallToolResult{StructuredContent: json.RawMessage("{\"data\":\"\xff\"}")},
			"the tool's result held binary data in its structured content at $.data (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content",
		},
		{
			"typed struct field with invalid UTF-8",
			&mcp.CallToolResult{StructuredContent: []typed{{Name: "ok"}, {Name: "\xc3", Skip: "\xff"}}},
			"the tool's result held binary data in its structured content at $[1].name (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content",
		},
		{
			"custom marshaler emitting invalid UTF-8",
			&mcp.CallToolResult{StructuredContent: map[string]any{"v": rawMarshaler("\"\xff\"")}},
			"the tool's result held binary data in its structured content at $.v (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content",
		},
		{
			"path keys written as identifiers only where they are one",
			&mcp.CallToolResult{StructuredContent: map[string]any{"0lead": map[string]any{"in9": map[string]any{"9": map[string]any{"_x0": "\xff"}}}}},
			`the tool's result held binary data in its structured content at $["0lead"].in9["9"]._x0 (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content`,
		},
		{
			// json:"-" leaves a field out; json:"-," names it "-".
			"typed field named - is checked, a field left out is not",
			&mcp.CallToolResult{StructuredContent: dashFields{Skip: "a\xff", Dash: "\xff"}},
			`the tool's result held binary data in its structured content at $["-"] (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content`,
		},
		{
			"typed map with a non-string key",
			&mcp.CallToolResult{StructuredContent: map[int]string{7: "\xff"}},
			`the tool's result held binary data in its structured content at $["7"] (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content`,
		},
		{
			"typed map with an invalid key",
			&mcp.CallToolResult{StructuredContent: map[string]string{"k\xff": "v"}},
			"the tool's result held binary data in a key of its structured content (invalid UTF-8 at byte 1); binary data must be sent as image, audio or blob resource content",
		},
		{
			"typed map, one bad value among good ones",
			&mcp.CallToolResult{StructuredContent: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "bad": "\xff"}},
			"the tool's result held binary data in its structured content at $.bad (invalid UTF-8 at byte 0); binary data must be sent as image, audio or blob resource content",
		},
		{
			"_meta",
			&mcp.CallToolResult{Meta: mcp.Meta{"k": "\x00"}},
			"the tool's result held binary data in its _meta at $.k (a NUL byte at byte 0); binary data must be sent as image, audio or blob resource content",
		},
	}
	s := New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Result(tc.r)
			if err == nil {
				t.Fatalf("no error; result %+v", out)
			}
			if out != nil {
				t.Errorf("a result came with the error")
			}
			if !errors.Is(err, ErrBinary) {
				t.Errorf("error is not ErrBinary: %v", err)
			}
			if err.Error() != tc.want {
				t.Errorf("message\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

// dashFields has a field encoding/json leaves out and one it names "-".
type dashFields struct {
	Skip string `json:"-"`
	//lint:ignore SA5008 a field named "-" is the case under test
	Dash string `json:"-,"`
}

// rawMarshaler marshals to its own bytes, whatever they are.
type rawMarshaler string

func (r rawMarshaler) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// otherContent is a content type Result does not know; embedding gives it
// the SDK's unexported interface method.
type otherContent struct{ mcp.TextContent }

// OUT-1: content that cannot be checked is refused, not passed on.
func TestResultRejectsUnknownContent_OUT1(t *testing.T) {
	_, err := New().Result(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "x"}, &otherContent{mcp.TextContent{Text: "\x1b[31m"}},
	}})
	want := "the tool's result held content item 1 of type *sanitize.otherContent, which the hub cannot check for control characters and secrets; only text, image, audio, resource link and embedded resource content can be passed on"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
	if errors.Is(err, ErrBinary) {
		t.Error("an unknown content type is not binary data")
	}
}

// OUT-1: structured content of every shape the SDK allows is walked, and
// left as it is (same type) when nothing needs changing.
func TestResultStructuredContent_OUT1(t *testing.T) {
	type inner struct {
		Note string `json:"note"`
	}
	type report struct {
		Title  string            `json:"title"`
		APIKey string            `json:"api_key"`
		Inner  *inner            `json:"inner,omitempty"`
		Labels map[string]string `json:"labels"`
		Count  int64             `json:"count"`
	}
	clean := report{Title: "t", Labels: map[string]string{"a": "b"}, Count: 1 << 60}
	cleanRaw := json.RawMessage(`{"n": 12345678901234567890, "s": "<b>&</b>"}`)
	cases := []struct {
		name     string
		in       any
		wantJSON string
		same     bool // the very input comes back
	}{
		{"nil", nil, "null", true},
		{"string", "\x1b[1mhi", `"hi"`, false},
		{"number", 3.5, "3.5", true},
		{"array", []any{"a\x07", 1.0, []any{"token: x"}}, `["a",1,["token: [REDACTED]"]]`, false},
		{"clean map", map[string]any{"a": "b", "c": []any{1.0}}, `{"a":"b","c":[1]}`, true},
		{"map with secret key", map[string]any{fakeSK: 1.0}, `{"[REDACTED]":1}`, false},
		{"typed map", map[string]string{"k": "v\x1b[0m"}, `{"k":"v"}`, false},
		{"typed struct", report{Title: "a\u0085b", APIKey: fakeAKIA, Inner: &inner{Note: "sk: " + fakeSK}, Count: 1 << 60},
			`{"api_key":"[REDACTED]","count":1152921504606846976,"inner":{"note":"sk: [REDACTED]"},"labels":null,"title":"ab"}`, false},
		{"pointer to struct", &inner{Note: "\x1b]0;x\x07n"}, `{"note":"n"}`, false},
		{"clean typed struct kept", clean, `{"title":"t","api_key":"","labels":{"a":"b"},"count":1152921504606846976}`, true},
		{"raw JSON", json.RawMessage(`{"n": 12345678901234567890, "k": "Bearer abcdefgh12345"}`),
			`{"k":"Bearer [REDACTED]","n":12345678901234567890}`, false},
		{"clean raw JSON kept byte for byte", cleanRaw, `{"n":12345678901234567890,"s":"\u003cb\u003e\u0026\u003c/b\u003e"}`, true},
		{"typed value inside generic map", map[string]any{"r": []string{"ok", "password=pw"}}, `{"r":["ok","password=[REDACTED]"]}`, false},
	}
	s := New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Result(&mcp.CallToolResult{StructuredContent: tc.in})
			if err != nil {
				t.Fatal(err)
			}
			got := out.StructuredContent
			if gotJSON := toJSON(t, got); gotJSON != tc.wantJSON {
				t.Errorf("got %s\nwant %s", gotJSON, tc.wantJSON)
			}
			if tc.same && !reflect.DeepEqual(got, tc.in) {
				t.Errorf("unchanged value came back as %T %v", got, got)
			}
			if tc.same && reflect.TypeOf(got) != reflect.TypeOf(tc.in) {
				t.Errorf("unchanged value came back as %T, want %T", got, tc.in)
			}
		})
	}
}

// OUT-1: when sanitising makes two object keys equal, the result is
// refused rather than one value silently dropped.
func TestResultKeyCollision_OUT1(t *testing.T) {
	_, err := New().Result(&mcp.CallToolResult{StructuredContent: map[string]any{
		"x": map[string]any{"a\x07": 1.0, "a": 2.0},
	}})
	want := `the tool's result held two keys in its structured content at $.x that are the same once control characters and secrets are removed ("a"), so the result cannot be passed on whole`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}

// OUT-1: edge cases: no result, no content, nil items.
func TestResultEdgeCases_OUT1(t *testing.T) {
	s := New()
	if out, err := s.Result(nil); out != nil || err != nil {
		t.Errorf("Result(nil) = %v, %v", out, err)
	}
	out, err := s.Result(&mcp.CallToolResult{})
	if err != nil || out.Content != nil || out.StructuredContent != nil || out.Meta != nil {
		t.Errorf("empty result: %+v, %v", out, err)
	}
	// A nil item is written as null, which no client can read.
	var nilText *mcp.TextContent
	for _, item := range []mcp.Content{nil, nilText} {
		if _, err = s.Result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{}, item}}); !errors.Is(err, ErrMalformed) {
			t.Errorf("nil item %#v: %v", item, err)
		}
	}
	if out, err = s.Result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{}}}); err != nil || len(out.Content) != 1 {
		t.Errorf("an embedded resource with no resource: %+v, %v", out, err)
	}
	// Typed structured content that cannot be encoded is refused.
	_, err = s.Result(&mcp.CallToolResult{StructuredContent: map[string]any{"f": func() {}}})
	if err == nil || !strings.Contains(err.Error(), "could not be encoded as JSON") {
		t.Errorf("unencodable structured content: %v", err)
	}
}

// OUT-1: a 5 MiB text content item comes out of Result whole.
func TestResult5MiBTextPassesWhole_OUT1(t *testing.T) {
	in := fiveMiB()
	out, err := New().Result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Content[0].(*mcp.TextContent).Text; got != in {
		t.Fatalf("5 MiB text changed: %d bytes, want %d", len(got), len(in))
	}
}

// OUT-1: typed binary content passes as the protocol defines it, but what
// rides beside it is text like any other: the _meta and annotations of an
// image, an audio clip and a resource link are sanitised in a copy, and
// the caller's items are left as they were.
func TestResultSanitisesMetaOfTypedContent_OUT1(t *testing.T) {
	build := func() []mcp.Content {
		return []mcp.Content{
			&mcp.ImageContent{Data: slicesClone(binaryBytes), MIMEType: "image/png",
				Meta: mcp.Meta{"source": "password=hunter2"}, Annotations: &mcp.Annotations{Priority: 0.1}},
			&mcp.AudioContent{Data: slicesClone(binaryBytes), MIMEType: "audio/wav",
				Meta: mcp.Meta{"source": "password=hunter2"}, Annotations: &mcp.Annotations{Priority: 0.2}},
			&mcp.ResourceLink{URI: "file:///a", Name: "a", Meta: mcp.Meta{"source": "password=hunter2"}},
		}
	}
	in := &mcp.CallToolResult{Content: build()}
	out, err := New().Result(in)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range out.Content {
		b, _ := json.Marshal(c)
		if !strings.Contains(string(b), `"source":"password=[REDACTED]"`) {
			t.Errorf("item %d: %s", i, b)
		}
		if c == in.Content[i] {
			t.Errorf("item %d is the caller's own", i)
		}
	}
	if got, want := toJSON(t, in.Content), toJSON(t, build()); got != want {
		t.Errorf("the input changed:\n got %s\nwant %s", got, want)
	}
	if out.Content[1].(*mcp.AudioContent).Annotations == in.Content[1].(*mcp.AudioContent).Annotations {
		t.Error("the audio item's annotations are shared with the input")
	}
}
