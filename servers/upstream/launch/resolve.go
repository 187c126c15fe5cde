package launch

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Transports a server may be declared with.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// Declared is one mcp_servers entry as the company document writes it.
// A stdio server is started with Env; an http or sse server is dialled at URL
// with Headers.
type Declared struct {
	Name, Transport, Command string
	Args                     []string
	URL                      string
	Shared                   bool
	Env, Headers             map[string]string
	OptionalKeys             []string
	ToolPrefix               string
}

// SeatBlock is what a seat brings to one per-role server: its unit's mcp_env
// block for the server (the base) and its own (which wins key by key). It is
// nil for a shared server, which carries nobody's identity.
type SeatBlock struct {
	Unit, Seat map[string]string
}

// Lookup answers a variable's value. The hub passes one that asks the secret
// store first and the engine's environment behind it. A variable that is set
// to the empty string counts as unresolved all the same: an empty credential
// is never handed on.
type Lookup func(name string) (string, bool)

// HoldState says why a server is not started.
type HoldState string

const (
	// Waiting: the hub will obtain the missing credential itself (a
	// seat's OAuth grant); the server starts once it holds it. Resolve
	// never answers it: this build runs no pass that mints a ${VAR}.
	Waiting HoldState = "waiting"
	// Failed: nothing the hub runs will supply the value; a person must.
	Failed HoldState = "failed"
)

// Hold is why a server may not be started yet. It names variables and keys,
// never values.
type Hold struct {
	State HoldState
	// Variable is the reference that did not resolve.
	Variable string
	// Key is the env or header key whose value carries Variable; empty when
	// the reference is in the url.
	Key string
	// Integration names what the hub waits on (Waiting only).
	Integration string
	// Sentence is for the operator: what is missing and what to do about it.
	Sentence string
}

// String is the operator's sentence; it never carries a value.
func (h Hold) String() string { return h.Sentence }

// Resolved is a server as it is started: every reference replaced, optional
// keys that resolved to nothing left out. When Resolve also returns a Hold,
// only Name, Transport, Command and Args are set: nothing half-resolved is
// handed out.
type Resolved struct {
	Name, Transport, Command string
	Args                     []string
	URL                      string
	// Env (stdio) or Headers (http, sse) after merging server, unit and seat
	// values and resolving them. Only the transport's own map is set.
	Env, Headers map[string]string
	// Omitted lists optional keys left out because a reference in them did
	// not resolve, sorted.
	Omitted []string
	// EmptyKeys lists keys whose configured value is the empty string as
	// written (not a reference), sorted: the empty_env_vars warning names
	// them.
	EmptyKeys []string
	// Digest identifies everything the server is started with, so a
	// reconcile can leave an unchanged child alone and restart one whose
	// spec moved or whose credential rotated. It is derived from secret
	// values: compare it on the node, do not publish it.
	Digest string
}

// CanLaunch reports whether the spec names something to start at all: a
// command for stdio, a url for http and sse. Retrying a spec that cannot is
// pointless until a new revision replaces it, so callers do not schedule it.
func (r Resolved) CanLaunch() bool {
	switch r.Transport {
	case TransportStdio:
		return r.Command != ""
	case TransportHTTP, TransportSSE:
		return r.URL != ""
	}
	return false
}

// String describes the spec for logs without any resolved value: the url,
// the args and the env or header values may all carry credentials.
func (r Resolved) String() string {
	keys := sortedKeys(r.Env)
	if r.Transport != TransportStdio {
		keys = sortedKeys(r.Headers)
	}
	d := r.Digest
	if len(d) > 12 {
		d = d[:12]
	}
	return fmt.Sprintf("upstream %q (%s, command %q, %d args, keys %v, omitted %v, digest %s)",
		r.Name, r.Transport, r.Command, len(r.Args), keys, r.Omitted, d)
}

// GoString keeps %#v from printing the values String withholds.
func (r Resolved) GoString() string { return r.String() }

// normTransport is the declared transport, or the one the declaration
// implies (a url and no command mean http), matching the config reader.
func normTransport(d Declared) string {
	if d.Transport != "" {
		return d.Transport
	}
	if d.URL != "" && d.Command == "" {
		return TransportHTTP
	}
	return TransportStdio
}

// segment is a piece of a value: literal text, or a reference's name.
type segment struct {
	text string
	ref  bool
}

func isNameStart(c byte) bool {
	return c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
}

func isNameChar(c byte) bool { return isNameStart(c) || ('0' <= c && c <= '9') }

// parse splits a value into literals and ${NAME} references. Anything else
// that starts with '$' — $NAME, ${NAME:-x}, ${} — is kept as literal text, so
// a shell script passed as a value survives untouched. There is no escape:
// nothing in a value needs one, because only the exact ${NAME} form is read.
func parse(v string) []segment {
	var out []segment
	lit := 0
	for i := 0; i < len(v); {
		j := strings.Index(v[i:], "${")
		if j < 0 {
			break
		}
		j += i
		k := j + 2
		if k < len(v) && isNameStart(v[k]) {
			k++
			for k < len(v) && isNameChar(v[k]) {
				k++
			}
			if k < len(v) && v[k] == '}' {
				if lit < j {
					out = append(out, segment{text: v[lit:j]})
				}
				out = append(out, segment{text: v[j+2 : k], ref: true})
				i = k + 1
				lit = i
				continue
			}
		}
		i = j + 1
	}
	if lit < len(v) {
		out = append(out, segment{text: v[lit:]})
	}
	return out
}

// refs lists the variables a value references, in order of appearance.
func refs(v string) []string {
	var out []string
	for _, s := range parse(v) {
		if s.ref {
			out = append(out, s.text)
		}
	}
	return out
}

// expand resolves a value. It returns the variables that did not resolve, in
// order; the value is meaningless when there are any. A substituted value is
// not scanned again, so a secret that happens to contain ${...} is handed on
// as it is.
func expand(v string, lookup Lookup) (string, []string) {
	var b strings.Builder
	var missing []string
	for _, s := range parse(v) {
		if !s.ref {
			b.WriteString(s.text)
			continue
		}
		val, ok := "", false
		if lookup != nil {
			val, ok = lookup(s.text)
		}
		if !ok || val == "" {
			missing = append(missing, s.text)
			continue
		}
		b.WriteString(val)
	}
	return b.String(), missing
}

// layer names where a merged key's winning value was written.
type layer int

const (
	fromServer layer = iota
	fromUnit
	fromSeat
)

// entry is one merged key: its spelling as the winning layer wrote it, its raw
// value and where that came from.
type entry struct {
	key, raw string
	from     layer
}

// foldKey is the identity of a key: env keys are case-sensitive, while
// header names compare without regard to case, as HTTP defines them.
func foldKey(k string, headers bool) string {
	if headers {
		return strings.ToLower(k)
	}
	return k
}

// merge layers server, unit and seat values, the last winning per key. A
// later layer replaces the raw value whole, before anything is resolved, so a
// seat's value never falls back to the template's. Keys of one map are taken
// in sorted order so that two spellings of one header (refused when a
// document is written) still merge the same way every time.
func merge(headers bool, layers ...map[string]string) map[string]entry {
	out := map[string]entry{}
	for i, m := range layers {
		for _, k := range sortedKeys(m) {
			out[foldKey(k, headers)] = entry{key: k, raw: m[k], from: layer(i)}
		}
	}
	return out
}

// Resolve turns a declared server, plus the seat's blocks for a per-role
// child, into the spec it is started with — or says why it may not start.
//
// Every reference in the url and in the transport's map must resolve to a
// non-empty value. One that does not, under a key listed in OptionalKeys,
// leaves that key out whole; the url is never optional. Otherwise the server
// is held as Failed, naming the first unresolved reference in a stable order
// (the url, then keys sorted): this build runs no provisioning pass that
// would mint a value for a seat, so nothing but a person supplies one.
// command and args are taken as written. dataDir is the data directory
// the node's secret store is reached with ("" for the default), named in
// the command a failed hold's sentence suggests (SealCommand).
func Resolve(d Declared, seat *SeatBlock, lookup Lookup, dataDir string) (Resolved, *Hold) {
	tr := normTransport(d)
	headers := tr != TransportStdio
	r := Resolved{
		Name:      d.Name,
		Transport: tr,
		Command:   d.Command,
		Args:      append([]string(nil), d.Args...),
	}

	base := d.Env
	if headers {
		base = d.Headers
	}
	var unit, own map[string]string
	if seat != nil {
		unit, own = seat.Unit, seat.Seat
	}
	merged := merge(headers, base, unit, own)

	optional := map[string]bool{}
	for _, k := range d.OptionalKeys {
		optional[foldKey(k, headers)] = true
	}
	var first *Hold
	note := func(h *Hold) {
		if first == nil {
			first = h
		}
	}
	holdFor := func(v, key string, isURL, offerOptional bool) *Hold {
		// Set but empty reads differently from absent: the remedy is a
		// real value, not a missing one.
		set := false
		if lookup != nil {
			_, set = lookup(v)
		}
		return &Hold{State: Failed, Variable: v, Key: key,
			Sentence: failedSentence(d.Name, v, key, SealCommand(v, dataDir), headers, isURL, set, offerOptional)}
	}

	url, missing := expand(d.URL, lookup)
	for _, v := range missing {
		note(holdFor(v, "", true, false))
	}

	values := map[string]string{}
	for _, f := range slices.Sorted(maps.Keys(merged)) {
		e := merged[f]
		if e.raw == "" {
			values[e.key] = ""
			r.EmptyKeys = append(r.EmptyKeys, e.key)
			continue
		}
		val, missing := expand(e.raw, lookup)
		if len(missing) == 0 {
			values[e.key] = val
			continue
		}
		if optional[f] {
			r.Omitted = append(r.Omitted, e.key)
			continue
		}
		for _, v := range missing {
			note(holdFor(v, e.key, false, e.from == fromServer))
		}
	}

	if first != nil {
		return Resolved{Name: r.Name, Transport: r.Transport, Command: r.Command, Args: r.Args}, first
	}

	r.URL = url
	if len(values) > 0 {
		if headers {
			r.Headers = values
		} else {
			r.Env = values
		}
	}
	sort.Strings(r.Omitted)
	sort.Strings(r.EmptyKeys)
	r.Digest = digest(r)
	return r, nil
}

func failedSentence(server, v, key, seal string, headers, isURL, set, offerOptional bool) string {
	var b strings.Builder
	where := fmt.Sprintf("env key %s", key)
	if headers {
		where = fmt.Sprintf("header %s", key)
	}
	if isURL {
		where = "its url"
	}
	if set {
		fmt.Fprintf(&b, "MCP server %q was not started: ${%s} in %s is set to an empty value, and the hub does not start a server with an empty credential. Seal a real value with `%s` and then POST /config/reload.",
			server, v, where, seal)
	} else {
		fmt.Fprintf(&b, "MCP server %q was not started: ${%s} in %s does not resolve; neither the secret store nor the hub's environment holds it. Seal it with `%s` and then POST /config/reload, or set it in the hub's environment and restart the hub, since a running hub does not see exports made after it started.",
			server, v, where, seal)
	}
	switch {
	case isURL:
		b.WriteString(" A reference in the url cannot be declared optional: without the url there is nothing to connect to.")
	case offerOptional:
		fmt.Fprintf(&b, " If the server can run without it, list %s under the server's optional_keys so it is left out where nothing sets it.", key)
	}
	return b.String()
}

// digest hashes what the child is started with. Every field is
// length-prefixed so no two different specs encode alike, and header names
// are folded because two spellings send the same header.
func digest(r Resolved) string {
	h := sha256.New()
	put := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put("crewlet/upstream/spec/v1")
	put(r.Transport)
	put(r.Command)
	put(fmt.Sprint(len(r.Args)))
	for _, a := range r.Args {
		put(a)
	}
	put(r.URL)
	put(fmt.Sprint(len(r.Env)))
	for _, k := range sortedKeys(r.Env) {
		put(k)
		put(r.Env[k])
	}
	hv := map[string]string{}
	for k, v := range r.Headers {
		hv[strings.ToLower(k)] = v
	}
	put(fmt.Sprint(len(hv)))
	for _, k := range sortedKeys(hv) {
		put(k)
		put(hv[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// References lists the variables a declared value references, in order, by
// the same grammar Resolve reads: the hub redacts what they resolve to from
// every tool result, since each is a credential or a host setting the
// company chose not to write down.
func References(v string) []string { return refs(v) }

// Expand resolves a value's ${NAME} references by the same grammar, for a
// value the company file declares outside a server (a model provider's
// key): it answers the value and the names that did not resolve, in order;
// the value is meaningless when any did not.
func Expand(v string, lookup Lookup) (string, []string) { return expand(v, lookup) }
