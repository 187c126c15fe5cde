package hub

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The answers FuzzTransparency's scripted servers give, derived from the
// fuzz input one choice at a time: the same bytes always make the same
// answer, and every choice an input runs out of bytes for is the first.

// draw hands out the fuzz input's bytes as choices.
type draw struct {
	b []byte
	// invalid lets a string be written with bytes that are not UTF-8;
	// binary lets one hold a NUL. Each makes the whole answer one the hub
	// refuses, so they are decided once per input, not per string.
	invalid, binary bool
}

func (d *draw) byte() byte {
	if len(d.b) == 0 {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// n is a choice among k.
func (d *draw) n(k int) int { return int(d.byte()) % k }

// Texts an answer is made of: JSON and event-stream look-alikes, the token
// "method", JSON-RPC words, the hub's own _meta words, secrets the hub must
// redact (a configured ${VAR} value, the operator's token, a bearer
// credential), control characters it must strip, and Unicode it must keep.
var genTexts = []string{
	"method",
	"jsonrpc",
	"2.0",
	"result",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
	`{"jsonrpc":"2.0","id":"crewlet-call-1","result":{"content":[]}}`,
	"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n",
	"event: message\ndata: [1]\nid: 3\n\n",
	":\n\nretry: 10\n\ndata:",
	"\x1b[31mred\x1b[0m and plain",
	"\x1b]0;title\x07after an OSC",
	"next line\u0085C1",
	transparencySecret,
	"the key is " + transparencySecret + ", the token " + adaTok,
	"Authorization: Bearer abcdefghijklmnop1234",
	"crewlet/refusal",
	"forbidden",
	"héllo ☃ 𝄞 \u2028\u2029 ünïcödé",
	"",
	"</script><!-- \"quoted\" \\ back",
	"\r\n\ttabs and lines",
	"    ",
}

// genKeys are object keys: JSON-RPC members at every depth, the hub's and
// the protocol's _meta words, and the refusal shape's members.
var genKeys = []string{
	"jsonrpc", "id", "method", "result", "error", "params", "_meta",
	"content", "type", "text", "isError", "structuredContent",
	"crewlet/refusal", "crewlet/source", "upstream/crewlet/refusal",
	"io.modelcontextprotocol/serverInfo", "progressToken", "class", "sentence",
	"data", "",
}

var genNumbers = []string{
	"0", "-1", "42", "3.5", "1e3", "-2.5e-3", "9007199254740993",
	"123456789012345678901234567890", "0.1", "-0",
}

// text is a string: one of genTexts, or bytes of the input.
func (d *draw) text() string {
	k := d.n(len(genTexts) + 8)
	if k < len(genTexts) {
		s := genTexts[k]
		if d.binary && d.n(4) == 0 {
			s += "\x00nul"
		}
		return s
	}
	n := d.n(24)
	var b []byte
	for range n {
		b = append(b, d.byte())
	}
	s := string(b)
	if !d.invalid {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if !d.binary {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return s
}

func (d *draw) key() string {
	if k := d.n(len(genKeys) + 4); k < len(genKeys) {
		return genKeys[k]
	}
	return d.text()
}

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, everything else as it is, invalid UTF-8 included.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			if _, size := utf8.DecodeRuneInString(s[i:]); size > 1 {
				b = append(b, s[i:i+size]...)
				i += size
				continue
			}
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// value writes any JSON value, nesting at most depth more levels.
func (d *draw) value(b []byte, depth int) []byte {
	k := d.n(10)
	if depth <= 0 {
		k %= 6
	}
	switch k {
	case 0:
		return append(b, "null"...)
	case 1:
		if d.n(2) == 0 {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case 2, 3:
		return append(b, genNumbers[d.n(len(genNumbers))]...)
	case 4, 5:
		return appendString(b, d.text())
	case 6, 7:
		return d.object(b, depth-1)
	default:
		b = append(b, '[')
		for i := range d.n(4) {
			if i > 0 {
				b = append(b, ',')
			}
			b = d.value(b, depth-1)
		}
		return append(b, ']')
	}
}

// object writes an object of up to three members, keys repeated at times.
func (d *draw) object(b []byte, depth int) []byte {
	b = append(b, '{')
	for i := range d.n(4) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, d.key())
		b = append(b, ':')
		b = d.value(b, depth)
	}
	return append(b, '}')
}

// member writes ,"key":value (the comma only after the first).
func member(b []byte, first *bool, key string) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = appendString(b, key)
	return append(b, ':')
}

var (
	genImageTypes = []string{"image/png", "image/jpeg", "image/svg+xml"}
	genAudioTypes = []string{"audio/wav", "audio/mpeg"}
	genAudience   = []string{`["user"]`, `["assistant"]`, `["user","assistant"]`}
	// genTypeTails make a MIME type hold text the rules change: a secret,
	// a control character, an escape sequence.
	genTypeTails = []string{"; name=" + transparencySecret, "; token=" + adaTok, "\x07", "\x1b[31m", "\u0085", "; charset=\"utf-8\""}
)

// mimeType is one of types, at times with a tail the rules change.
func (d *draw) mimeType(types []string) string {
	t := types[d.n(len(types))]
	if d.n(3) == 0 {
		t += genTypeTails[d.n(len(genTypeTails))]
	}
	return t
}

// blob is base64 of some input bytes: binary content by type.
func (d *draw) blob() string {
	n := d.n(48)
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = d.byte()
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// item writes one content item of any type the protocol has.
func (d *draw) item(b []byte) []byte {
	first := true
	b = append(b, '{')
	switch d.n(5) {
	case 0, 1:
		b = append(member(b, &first, "type"), `"text"`...)
		b = appendString(member(b, &first, "text"), d.text())
	case 2:
		b = d.media(b, &first)
	case 3:
		b = append(member(b, &first, "type"), `"resource_link"`...)
		b = appendString(member(b, &first, "uri"), "https://example.com/"+uriPath(d.text()))
		b = appendString(member(b, &first, "name"), d.text())
		if d.n(2) == 0 {
			b = appendString(member(b, &first, "title"), d.text())
			b = appendString(member(b, &first, "description"), d.text())
			b = appendString(member(b, &first, "mimeType"), "text/plain")
		}
	default:
		b = append(member(b, &first, "type"), `"resource"`...)
		b = append(member(b, &first, "resource"), '{')
		in := true
		b = appendString(member(b, &in, "uri"), "file:///"+uriPath(d.text()))
		switch d.n(5) {
		case 0, 1:
			b = appendString(member(b, &in, "mimeType"), "text/plain")
			b = appendString(member(b, &in, "text"), d.text())
		case 2, 3:
			b = appendString(member(b, &in, "mimeType"), d.mimeType([]string{"application/octet-stream"}))
			b = appendString(member(b, &in, "blob"), d.blob())
		default:
			// Both: which the SDK keeps is its business, and the hub's
			// must be the same.
			b = appendString(member(b, &in, "text"), d.text())
			b = appendString(member(b, &in, "blob"), d.blob())
		}
		if d.n(3) == 0 {
			b = d.object(member(b, &in, "_meta"), 3)
		}
		b = append(b, '}')
	}
	if d.n(3) == 0 {
		b = d.object(member(b, &first, "_meta"), 3)
	}
	if d.n(4) == 0 {
		b = append(member(b, &first, "annotations"), `{"audience":`...)
		b = append(b, genAudience[d.n(len(genAudience))]...)
		b = append(b, `,"priority":0.5}`...)
	}
	return append(b, '}')
}

// uriPath keeps a URI's path to characters a URI holds, so the SDK's client
// reads it; what the hub does to the rest of the text is tested elsewhere.
// media writes the members of an image or an audio item: its type, data
// and MIME type.
func (d *draw) media(b []byte, first *bool) []byte {
	kind, types := "image", genImageTypes
	if d.n(2) == 0 {
		kind, types = "audio", genAudioTypes
	}
	b = appendString(member(b, first, "type"), kind)
	b = appendString(member(b, first, "data"), d.blob())
	return appendString(member(b, first, "mimeType"), d.mimeType(types))
}

func uriPath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// metaObject writes a _meta object whose keys are mostly the ones the hub
// must rename or drop.
func (d *draw) metaObject(b []byte) []byte {
	first := true
	b = append(b, '{')
	for range 1 + d.n(4) {
		b = member(b, &first, d.key())
		b = d.value(b, 3)
	}
	return append(b, '}')
}

// nested writes levels of arrays around a string.
func nested(b []byte, levels int) []byte {
	for range levels {
		b = append(b, '[')
	}
	b = append(b, `"deep"`...)
	for range levels {
		b = append(b, ']')
	}
	return b
}

// The modes an input's first byte chooses beyond the plain answer.
const (
	modeDeep  = 1 // structured content nested near and past the SDK's bound
	modeLarge = 2 // a long text
	modeCut   = 4 // the connection broken half way through the answer
	modeBound = 6 // a message just under or just past the 16 MiB bound
)

// boundSizes are the sizes of a result near the bound on one message
// (16 MiB, the SDK's on an event or a stdio line and the hub's): the
// response around it adds a few tens of bytes, so the first is read
// whole, unless a hop adds more, and the second is not. Such an input
// is slow to compare on every route, so no seed holds one.
var boundSizes = []int{boundMessage - 160, boundMessage + 64}

// boundMessage is the hub's bound on one message of a server, 16 MiB.
const boundMessage = 16 << 20

// boundSlot marks where the item that brings a result to its size goes:
// a NUL, which appendString never writes raw.
const boundSlot = "\x00bound\x00"

// fillBound puts, in the slot, a text or an image whose size brings the
// result to size.
func (d *draw) fillBound(b []byte, size int) []byte {
	i := bytes.Index(b, []byte(boundSlot))
	if i < 0 {
		return b
	}
	rest := size - (len(b) - len(boundSlot))
	var item []byte
	if d.n(2) == 0 {
		// Each piece is escaped on its own as it is in the whole.
		var text strings.Builder
		for escaped := 0; ; {
			piece := d.text() + " lorem ipsum dolor sit amet "
			n := len(appendString(nil, piece)) - 2
			if escaped+n > rest-64 {
				break
			}
			text.WriteString(piece)
			escaped += n
		}
		item = appendString([]byte(`{"type":"text","text":`), text.String())
		item = append(item, '}')
	} else {
		raw := make([]byte, (rest-64)*3/4)
		for j := range raw {
			raw[j] = byte(j * 7)
		}
		item = appendString([]byte(`{"type":"image","mimeType":"image/png","data":`), base64.StdEncoding.EncodeToString(raw))
		item = append(item, '}')
	}
	// Whitespace after the item makes the size exact.
	if pad := rest - len(item); pad > 0 {
		item = append(item, bytes.Repeat([]byte{' '}, pad)...)
	}
	out := make([]byte, 0, size)
	out = append(out, b[:i]...)
	out = append(out, item...)
	return append(out, b[i+len(boundSlot):]...)
}

// deepLevels are how deep the structured content nests: the message adds
// two levels (the response and its result) and the SDK reads 1,000.
var deepLevels = []int{8, 500, 997, 998, 999, 1000, 1500}

// largeSizes are the long texts' lengths.
var largeSizes = []int{4 << 10, 64 << 10, 1 << 20}

// deriveScript makes an answer of data: the answer, then, of the bytes
// left, the requests of the client the server makes before it (so an input
// written before there were any keeps its answer).
func deriveScript(data []byte) *script {
	d := &draw{b: data}
	sc := d.answer()
	if d.n(3) == 1 {
		// Requests go out on the call's stream: the answer is streamed.
		sc.sse = true
		for range 1 + d.n(3) {
			at := d.n(len(sc.notes) + 1)
			sc.notes = slices.Insert(sc.notes, at, d.ask())
		}
	}
	return sc
}

// answer makes the answer.
func (d *draw) answer() *script {
	flags := d.byte()
	d.invalid = flags&0x08 != 0 && flags&0x10 != 0
	d.binary = flags&0x20 != 0 && flags&0x40 != 0
	mode := int(flags>>5) & 7 // overlaps binary's bits, so each shows with the others
	sc := &script{sse: flags&1 != 0, member: "result"}
	// A broken connection costs the hub a restart of a stdio server, so
	// it is one in four answers of its mode.
	sc.cut = mode == modeCut && d.n(4) == 0
	// An answer near the bound takes some 40 s to compare on every route,
	// past the 10 s Go's fuzzing worker gives an input: an exploration
	// makes none, and a replay compares one the corpus holds.
	bound := mode == modeBound && d.n(32) == 0 && !fuzzing()
	if sc.sse {
		for range d.n(4) {
			sc.notes = append(sc.notes, d.note())
		}
	}
	if flags&6 == 6 {
		// A JSON-RPC error instead of a result.
		sc.member = "error"
		codes := []string{"-32603", "-32602", "-32601", "-32000", "1", "0"}
		first := true
		b := []byte{'{'}
		b = append(member(b, &first, "code"), codes[d.n(len(codes))]...)
		b = appendString(member(b, &first, "message"), d.text())
		if d.n(2) == 0 {
			b = d.value(member(b, &first, "data"), 4)
		}
		sc.body = append(b, '}')
		return sc
	}
	first := true
	b := []byte{'{'}
	if d.n(8) == 0 && d.n(2) == 0 {
		// A member of the wrong type: a result no client can read.
		wrong := []string{"5", `"text"`, `{"type":"text","text":"x"}`, "true"}
		b = append(member(b, &first, "content"), wrong[d.n(len(wrong))]...)
	} else if d.n(8) != 0 {
		b = append(member(b, &first, "content"), '[')
		for i := range d.n(7) {
			if i > 0 {
				b = append(b, ',')
			}
			b = d.item(b)
		}
		if bound {
			if b[len(b)-1] != '[' {
				b = append(b, ',')
			}
			b = append(b, boundSlot...)
		}
		if mode == modeLarge {
			if b[len(b)-1] != '[' {
				b = append(b, ',')
			}
			size := largeSizes[d.n(2)]
			// 1 MiB on every route takes longer than the 10 s Go's
			// fuzzing worker gives an input: only a replay compares it.
			if d.n(4) == 0 && !fuzzing() {
				size = largeSizes[2]
			}
			var text strings.Builder
			for text.Len() < size {
				text.WriteString(d.text())
				text.WriteString(" lorem ipsum dolor sit amet ")
			}
			b = appendString(append(b, `{"type":"text","text":`...), text.String())
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	switch {
	case mode == modeDeep:
		b = nested(member(b, &first, "structuredContent"), deepLevels[d.n(len(deepLevels))])
	case d.n(2) == 0:
		if d.n(4) == 0 {
			b = d.value(member(b, &first, "structuredContent"), 6)
		} else {
			b = d.object(member(b, &first, "structuredContent"), 6)
		}
	}
	if d.n(2) == 0 {
		b = d.metaObject(member(b, &first, "_meta"))
	}
	switch d.n(4) {
	case 0:
		b = append(member(b, &first, "isError"), "true"...)
	case 1:
		b = append(member(b, &first, "isError"), "false"...)
	}
	if d.n(3) == 0 {
		// JSON-RPC members inside the result, where only a reader of the
		// message's top level tells them from the real ones.
		for range 1 + d.n(3) {
			b = d.value(member(b, &first, genKeys[d.n(5)]), 3)
		}
	}
	sc.body = append(b, '}')
	if bound {
		sc.body = d.fillBound(sc.body, boundSizes[d.n(len(boundSizes))])
	}
	return sc
}

var genLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// note is a log line or a progress notification.
func (d *draw) note() note {
	first := true
	if d.n(2) == 0 {
		b := []byte{'{'}
		b = appendString(member(b, &first, "level"), genLevels[d.n(len(genLevels))])
		if d.n(2) == 0 {
			b = appendString(member(b, &first, "logger"), d.text())
		}
		b = d.value(member(b, &first, "data"), 4)
		if d.n(3) == 0 {
			b = d.metaObject(member(b, &first, "_meta"))
		}
		return note{method: "notifications/message", params: append(b, '}')}
	}
	// The progress token, the call's own, is written first when the call
	// comes: these are the members after it.
	var b []byte
	b = append(b, `"progress":`...)
	b = strconv.AppendInt(b, int64(1+d.n(9)), 10)
	b = append(b, `,"total":10,"message":`...)
	b = appendString(b, d.text())
	if d.n(3) == 0 {
		b = d.metaObject(append(b, `,"_meta":`...))
	}
	return note{method: "notifications/progress", params: append(b, '}')}
}
