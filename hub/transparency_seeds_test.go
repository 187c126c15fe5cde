package hub

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The inputs FuzzTransparency replays: its seeds, and the corpus under
// testdata/fuzz/FuzzTransparency that TestGenerateTransparencyCorpus
// writes when asked (-transparency.gen). Both are found the same way: the
// tail of an input is drawn from a fixed random source until the answer
// deriveScript makes of it is of the kind wanted, so each kind is there
// whatever the generator's choices, and the same kinds come out every time.

var genCorpus = flag.Bool("transparency.gen", false, "write FuzzTransparency's corpus under testdata/fuzz/FuzzTransparency")

// seedKind is a kind of answer the replayed inputs must hold: the input's
// first byte (deriveScript's flags) and a test of the answer made.
type seedKind struct {
	name  string
	flags byte
	is    func(*script) bool
}

// slowKinds are too slow for an exploration's worker, which gives an
// input 10 s: on every route, a 1 MiB text takes longer.
var slowKinds = map[string]bool{"1 MiB text": true, "a result just past the 16 MiB bound": true}

func bodyHas(subs ...string) func(*script) bool {
	return func(sc *script) bool {
		for _, s := range subs {
			if !bytes.Contains(sc.body, []byte(s)) {
				return false
			}
		}
		return true
	}
}

func notesAtLeast(n int, also func(*script) bool) func(*script) bool {
	return func(sc *script) bool { return len(sc.onlyNotes()) >= n && also(sc) }
}

func broken(also func(*script) bool) func(*script) bool {
	return func(sc *script) bool { return sc.cut && also(sc) }
}

func deepAs(levels int) func(*script) bool {
	return bodyHas(strings.Repeat("[", levels) + `"deep"` + "]")
}

// largeAs tests for a long text of at least size bytes.
func largeAs(size int) func(*script) bool {
	return func(sc *script) bool { return len(sc.body) >= size && len(sc.body) < 2*size+(64<<10) }
}

// itemWith tests for a content item of the type kind whose field, as
// written, holds every sub.
func itemWith(kind, field string, subs ...string) func(*script) bool {
	return func(sc *script) bool {
		var r struct {
			Content []map[string]json.RawMessage `json:"content"`
		}
		if json.Unmarshal(sc.body, &r) != nil {
			return false
		}
		for _, it := range r.Content {
			if string(it["type"]) != `"`+kind+`"` {
				continue
			}
			if found := bodyHas(subs...)(&script{body: it[field]}); found {
				return true
			}
		}
		return false
	}
}

func collides(sc *script) bool {
	v := &view{Result: map[string]any{}}
	if m, ok := canonical(sc.body).(map[string]any); ok {
		v.Result = m
	}
	text := func(s string) (string, error) { return clean().Text(s) }
	return errors.Is(textWalk(v.Result, text), errCollision)
}

// textOnly tests for a success of text items alone, several of them: the
// answer the hub writes in one pass over the server's JSON.
func textOnly(sc *script) bool {
	m, ok := canonical(sc.body).(map[string]any)
	items, _ := m["content"].([]any)
	if !ok || len(items) < 2 || m["isError"] == true {
		return false
	}
	for _, it := range items {
		item, _ := it.(map[string]any)
		if item["type"] != "text" || item["annotations"] != nil {
			return false
		}
	}
	return true
}

var seedKinds = []seedKind{
	{"text items alone", 0x00, textOnly},
	{"text items alone on a stream", 0x01, textOnly},
	{"plain result", 0x00, bodyHas(`"content":[{`)},
	{"text exactly method", 0x00, bodyHas(`"text":"method"`)},
	{"every content type", 0x00, bodyHas(`"type":"text"`, `"type":"image"`, `"type":"audio"`, `"type":"resource_link"`, `"type":"resource"`)},
	{"structured content with JSON-RPC keys", 0x00, bodyHas(`"structuredContent":{"`, `"method"`, `"id"`)},
	{"hub meta keys", 0x00, bodyHas(`"_meta":{"crewlet/`)},
	{"protocol meta keys", 0x00, bodyHas(`"_meta":{"io.modelcontextprotocol/`)},
	{"secrets and escapes", 0x00, bodyHas("tr-secret-8c1f4e27d9", `\u001b[31m`)},
	{"failed result", 0x00, bodyHas(`"isError":true`)},
	{"content of the wrong type", 0x00, func(sc *script) bool {
		return bytes.HasPrefix(sc.body, []byte(`{"content":`)) && !bytes.HasPrefix(sc.body, []byte(`{"content":[`))
	}},
	{"event-stream look-alike text", 0x00, bodyHas(`data: {\"jsonrpc\"`)},
	{"keys colliding once clean", 0x00, collides},
	{"event stream with notes", 0x01, notesAtLeast(2, bodyHas(`"content":[{`))},
	{"event stream with three notes", 0x01, notesAtLeast(3, bodyHas(`"content"`))},
	{"JSON-RPC error", 0x06, bodyHas(`"code":`, `"data":`)},
	{"JSON-RPC error on a stream", 0x07, notesAtLeast(1, bodyHas(`"code":`))},
	{"invalid UTF-8", 0x18, func(sc *script) bool { return !utf8.Valid(sc.body) }},
	{"invalid UTF-8 in a note", 0x19, func(sc *script) bool {
		for _, n := range sc.onlyNotes() {
			if !utf8.Valid(n.params) {
				return utf8.Valid(sc.body)
			}
		}
		return false
	}},
	{"a NUL in a text", 0x60, bodyHas(`\u0000nul`)},
	{"a NUL in a note", 0x61, func(sc *script) bool {
		for _, n := range sc.onlyNotes() {
			if bytes.Contains(n.params, []byte(`\u0000nul`)) {
				return !bytes.Contains(sc.body, []byte(`\u0000nul`))
			}
		}
		return false
	}},
	{"nested 500 levels", 0x20, deepAs(500)},
	{"nested 998 levels, the deepest read", 0x20, deepAs(998)},
	{"nested 999 levels, one past", 0x20, deepAs(999)},
	{"nested 1,500 levels", 0x21, deepAs(1500)},
	{"an answer broken mid-way", 0x80, broken(bodyHas(`"content":[{`))},
	// The notes a stdio server wrote before it died reach the client
	// before the call is told it died (issue 25).
	{"a stream broken mid-answer, after its notes", 0x81, broken(notesAtLeast(2, bodyHas(`"content":[{`)))},
	{"an image whose MIME type holds a secret", 0x00, itemWith("image", "mimeType", transparencySecret)},
	{"audio whose MIME type holds a control character", 0x00, itemWith("audio", "mimeType", `\u0007`)},
	{"a resource with text and blob", 0x00, itemWith("resource", "resource", `"blob"`, `"text"`)},
	{"64 KiB text", 0x40, largeAs(64 << 10)},
	{"1 MiB text", 0x41, largeAs(1 << 20)},
	// The answer FuzzTransparency found taking a stdio child down, and
	// refused by the hub over HTTP where a direct client reads it.
	{"a result just past the 16 MiB bound", 0xc0, func(sc *script) bool { return len(sc.body) > boundMessage }},
}

func init() { seedKinds = append(seedKinds, askKinds...) }

// asking tests for a script that makes a request of method (any, "")
// whose params, as written, hold every sub.
func asking(method string, also func(*script) bool, subs ...string) func(*script) bool {
	return func(sc *script) bool {
		for _, a := range sc.scriptAsks() {
			if (method == "" || a.method == method) && bodyHas(subs...)(&script{body: a.params}) {
				return also(sc)
			}
		}
		return false
	}
}

// interleaved tests for requests between notes: a note before the first
// and one after it.
func interleaved(sc *script) bool {
	first := sc.firstAsk()
	return first > 0 && first < len(sc.notes) && len(sc.onlyNotes()) > first
}

func anyScript(*script) bool { return true }

// askKinds are the requests of the client the replayed inputs must hold.
var askKinds = []seedKind{
	{"a sampling request between notes", 0x01, asking("sampling/createMessage", interleaved, `"messages":[{`)},
	{"an elicitation form the client fills in", 0x00, asking("elicitation/create", anyScript, `"answer":{"type":"string"`)},
	{"an elicitation the client declines", 0x00, asking("elicitation/create", anyScript, `"other":{"type":"string"`)},
	{"a URL elicitation", 0x00, asking("elicitation/create", anyScript, `"mode":"url"`)},
	{"a roots request with _meta", 0x00, asking("roots/list", anyScript, `"_meta":{`)},
	{"a roots request without params", 0x00, func(sc *script) bool {
		for _, a := range sc.scriptAsks() {
			if a.method == "roots/list" && a.params == nil {
				return true
			}
		}
		return false
	}},
	{"three requests", 0x00, func(sc *script) bool { return sc.asks() == 3 }},
	{"a sampling request holding secrets", 0x00, asking("sampling/createMessage", anyScript, transparencySecret)},
	{"an elicitation holding escapes", 0x00, asking("elicitation/create", anyScript, `\u001b[31m`)},
	{"a request with the hub's meta keys", 0x00, asking("", anyScript, `"_meta":{"crewlet/`)},
	{"a request with JSON-RPC members in its params", 0x00, asking("", anyScript, `"jsonrpc":`, `"id":`)},
	{"a sampling request with an image", 0x00, asking("sampling/createMessage", anyScript, `"type":"image"`)},
	{"a sampling request no client decodes", 0x00, asking("sampling/createMessage", anyScript, `"messages":5`)},
	{"an elicitation no client decodes", 0x00, asking("elicitation/create", anyScript, `"message":5`)},
	{"a request holding a NUL", 0x60, asking("", anyScript, `\u0000nul`)},
	{"requests before a JSON-RPC error", 0x06, asking("", bodyHas(`"code":`))},
	{"requests before an answer broken mid-way", 0x80, asking("", broken(bodyHas(`"content":[{`)))},
}

// findInput draws tails for kind from src until one makes an answer of
// that kind.
func findInput(tb testing.TB, kind seedKind, src *rand.Rand) []byte {
	for range 200000 {
		in := make([]byte, 1+src.IntN(400))
		in[0] = kind.flags
		for i := 1; i < len(in); i++ {
			in[i] = byte(src.UintN(256))
		}
		if kind.is(deriveScript(in)) {
			return in
		}
	}
	tb.Fatalf("no input of the kind %q found", kind.name)
	return nil
}

// transparencySeeds are one input of each kind.
func transparencySeeds(tb testing.TB) [][]byte {
	src := rand.New(rand.NewPCG(25, 2))
	var out [][]byte
	for _, k := range seedKinds {
		if slowKinds[k.name] && fuzzing() {
			// The generator makes none while fuzzing.
			out = append(out, nil)
			continue
		}
		out = append(out, findInput(tb, k, src))
	}
	return out
}

// TestGenerateTransparencyCorpus writes FuzzTransparency's corpus: one
// more input of each kind (but the slowest: the 1 MiB text, and the broken
// answers, each of which ends a stdio server the hub must restart), drawn from another
// random source than the seeds', in Go's corpus file format. It runs only
// when asked.
func TestGenerateTransparencyCorpus(t *testing.T) {
	if !*genCorpus {
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzTransparency")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := rand.New(rand.NewPCG(25, 3))
	for round := range 1 {
		for _, k := range seedKinds {
			if slowKinds[k.name] || k.flags&0xe0 == 0x80 {
				continue
			}
			in := findInput(t, k, src)
			sum := sha256.Sum256(in)
			name := filepath.Join(dir, hex.EncodeToString(sum[:])[:16])
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: %s: %s", round, k.name, name)
		}
	}
}
