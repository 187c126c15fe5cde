package launch

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// loadCases decodes a testdata file, refusing fields the test does not know so
// a misspelt expectation cannot pass by being ignored.
func loadCases(t *testing.T, name string, into any) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// declaredJSON is Declared as the test files spell it.
type declaredJSON struct {
	Name         string            `json:"name"`
	Transport    string            `json:"transport"`
	Command      string            `json:"command"`
	Args         []string          `json:"args"`
	URL          string            `json:"url"`
	Shared       bool              `json:"shared"`
	Env          map[string]string `json:"env"`
	Headers      map[string]string `json:"headers"`
	OptionalKeys []string          `json:"optional_keys"`
	ToolPrefix   string            `json:"tool_prefix"`
}

// declared converts; the field lists match, only the tags differ.
func (d declaredJSON) declared() Declared { return Declared(d) }

type seatJSON struct {
	Unit map[string]string `json:"unit"`
	Seat map[string]string `json:"seat"`
}

// input is one call of Resolve: the declaration, the seat's blocks (absent
// for a shared server) and what the lookup holds.
type input struct {
	Declared declaredJSON      `json:"declared"`
	Seat     *seatJSON         `json:"seat"`
	Vars     map[string]string `json:"vars"`
}

func (in input) resolve() (Resolved, *Hold) {
	var seat *SeatBlock
	if in.Seat != nil {
		b := SeatBlock(*in.Seat)
		seat = &b
	}
	lookup := func(name string) (string, bool) {
		v, ok := in.Vars[name]
		return v, ok
	}
	return Resolve(in.Declared.declared(), seat, lookup, "")
}

type resolveFile struct {
	Cases []struct {
		Name string `json:"name"`
		input
		Want *struct {
			Transport string            `json:"transport"`
			URL       string            `json:"url"`
			Env       map[string]string `json:"env"`
			Headers   map[string]string `json:"headers"`
			Omitted   []string          `json:"omitted"`
			EmptyKeys []string          `json:"empty_keys"`
			CanLaunch bool              `json:"can_launch"`
		} `json:"want"`
		Hold *struct {
			State         HoldState `json:"state"`
			Variable      string    `json:"variable"`
			Key           string    `json:"key"`
			Integration   string    `json:"integration"`
			SentenceHas   []string  `json:"sentence_has"`
			SentenceLacks []string  `json:"sentence_lacks"`
		} `json:"hold"`
	} `json:"cases"`
	Digest []struct {
		Name string `json:"name"`
		A    input  `json:"a"`
		B    input  `json:"b"`
		Same bool   `json:"same"`
	} `json:"digest"`
}

// sameMap treats nil and empty alike: both mean "no keys".
func sameMap(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}

func sameList(a, b []string) bool { return len(a) == len(b) && slices.Equal(a, b) }

// TestResolve covers CFG-2, CFG-3, CFG-4, CFG-5, ENV-2 and MCP-7's CanLaunch
// from testdata/resolve.json.
func TestResolve(t *testing.T) {
	var f resolveFile
	loadCases(t, "resolve.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			if (c.Want == nil) == (c.Hold == nil) {
				t.Fatal("a case wants exactly one of want and hold")
			}
			d := c.Declared.declared()
			r, h := c.resolve()

			// CFG-2: command and args are passed as written, whatever
			// the outcome.
			if r.Command != d.Command || !sameList(r.Args, d.Args) {
				t.Errorf("command/args = %q %q, want as written %q %q", r.Command, r.Args, d.Command, d.Args)
			}
			assertNoSecrets(t, c.Vars, r, h)

			if c.Hold != nil {
				if h == nil {
					t.Fatalf("no hold; resolved %v env=%v headers=%v", r, r.Env, r.Headers)
				}
				if h.State != c.Hold.State || h.Variable != c.Hold.Variable || h.Key != c.Hold.Key || h.Integration != c.Hold.Integration {
					t.Errorf("hold = %+v, want state %q variable %q key %q integration %q",
						*h, c.Hold.State, c.Hold.Variable, c.Hold.Key, c.Hold.Integration)
				}
				for _, s := range c.Hold.SentenceHas {
					if !strings.Contains(h.Sentence, s) {
						t.Errorf("sentence lacks %q: %s", s, h.Sentence)
					}
				}
				for _, s := range c.Hold.SentenceLacks {
					if strings.Contains(h.Sentence, s) {
						t.Errorf("sentence has %q: %s", s, h.Sentence)
					}
				}
				// Nothing half-resolved is handed out beside a hold.
				if r.URL != "" || r.Env != nil || r.Headers != nil || r.Digest != "" {
					t.Errorf("held spec carries resolved parts: %+v", r)
				}
				return
			}
			if h != nil {
				t.Fatalf("unexpected hold: %s", h.Sentence)
			}
			w := c.Want
			if r.Name != d.Name || r.Transport != w.Transport || r.URL != w.URL {
				t.Errorf("name/transport/url = %q %q %q, want %q %q %q", r.Name, r.Transport, r.URL, d.Name, w.Transport, w.URL)
			}
			if !sameMap(r.Env, w.Env) {
				t.Errorf("env = %v, want %v", r.Env, w.Env)
			}
			if !sameMap(r.Headers, w.Headers) {
				t.Errorf("headers = %v, want %v", r.Headers, w.Headers)
			}
			if !sameList(r.Omitted, w.Omitted) {
				t.Errorf("omitted = %v, want %v", r.Omitted, w.Omitted)
			}
			if !sameList(r.EmptyKeys, w.EmptyKeys) {
				t.Errorf("empty keys = %v, want %v", r.EmptyKeys, w.EmptyKeys)
			}
			if r.CanLaunch() != w.CanLaunch {
				t.Errorf("CanLaunch = %v, want %v", r.CanLaunch(), w.CanLaunch)
			}
			if len(r.Digest) != 64 {
				t.Errorf("digest %q is not a sha256 hex", r.Digest)
			}
		})
	}
}

// assertNoSecrets: no value the lookup handed out may appear in any text
// rendering of the results. Values in the test files that stand for secrets
// start with "secret-".
func assertNoSecrets(t *testing.T, vars map[string]string, r Resolved, h *Hold) {
	t.Helper()
	texts := []string{r.String(), fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r)}
	if h != nil {
		texts = append(texts, h.Sentence, h.String(), fmt.Sprint(h), fmt.Sprintf("%+v", *h))
	}
	for _, v := range vars {
		if !strings.HasPrefix(v, "secret-") {
			continue
		}
		for _, s := range texts {
			if strings.Contains(s, v) {
				t.Errorf("a secret value leaked into text: %s", s)
			}
		}
	}
}

// TestResolveDigest covers CFG-7: the digest moves exactly when what the
// child is started with moves.
func TestResolveDigest(t *testing.T) {
	var f resolveFile
	loadCases(t, "resolve.json", &f)
	if len(f.Digest) == 0 {
		t.Fatal("no digest cases")
	}
	for _, c := range f.Digest {
		t.Run(c.Name, func(t *testing.T) {
			a, ha := c.A.resolve()
			b, hb := c.B.resolve()
			if ha != nil || hb != nil {
				t.Fatalf("digest cases must resolve: %v / %v", ha, hb)
			}
			if (a.Digest == b.Digest) != c.Same {
				t.Errorf("digests %s and %s: same=%v, want %v", a.Digest, b.Digest, a.Digest == b.Digest, c.Same)
			}
		})
	}
}

// TestResolveDoesNotAliasInputs: results are values a caller may keep and
// share; a later edit of the declaration must not reach them (package doc).
func TestResolveDoesNotAliasInputs(t *testing.T) {
	d := Declared{Name: "s", Command: "c", Args: []string{"a"}, Env: map[string]string{"K": "v"}}
	r, h := Resolve(d, nil, nil, "")
	if h != nil {
		t.Fatal(h)
	}
	d.Args[0] = "changed"
	d.Env["K"] = "changed"
	if r.Args[0] != "a" || r.Env["K"] != "v" {
		t.Errorf("result aliases its input: %q %q", r.Args, r.Env)
	}
}

// TestParse pins the reference grammar (CFG-2) piece by piece.
func TestParse(t *testing.T) {
	for in, want := range map[string][]string{
		"${A}":           {"A"},
		"x${_a1}y${B}":   {"_a1", "B"},
		"${A:-x}":        nil,
		"$A":             nil,
		"${}":            nil,
		"${9}":           nil,
		"${A":            nil,
		"$${A}":          {"A"},
		"${${A}}":        {"A"},
		"${A-}${B}":      {"B"},
		"Bearer ${TOK}":  {"TOK"},
		"no refs at all": nil,
	} {
		if got := refs(in); !sameList(got, want) {
			t.Errorf("refs(%q) = %q, want %q", in, got, want)
		}
	}
}

// CFG-2: the exact pieces a value is read as. A reference's name takes
// letters (either case, to the last of each), digits after the first
// character (0 to 9) and underscores; a neighbouring character ends it or
// makes the whole thing literal. No empty literal is made between, before
// or after references, and a value ending in "${" is literal text.
func TestParseSegments(t *testing.T) {
	ref := func(n string) segment { return segment{text: n, ref: true} }
	lit := func(s string) segment { return segment{text: s} }
	for in, want := range map[string][]segment{
		"${A}${B}":       {ref("A"), ref("B")},
		"${A}":           {ref("A")},
		"x${A}":          {lit("x"), ref("A")},
		"${A}y":          {ref("A"), lit("y")},
		"${Z}${z}${_}":   {ref("Z"), ref("z"), ref("_")},
		"${a}-${Zz_09}":  {ref("a"), lit("-"), ref("Zz_09")},
		"${X0}${X9}":     {ref("X0"), ref("X9")},
		"abc${":          {lit("abc${")},
		"abc$":           {lit("abc$")},
		"${@}${[}${`}":   {lit("${@}${[}${`}")},
		"${{}":           {lit("${{}")},
		"${X/}${X:}":     {lit("${X/}${X:}")},
		"${0A}":          {lit("${0A}")},
		"":               nil,
		"plain":          {lit("plain")},
		"${A}${":         {ref("A"), lit("${")},
		"${A}$${B}x${C}": {ref("A"), lit("$"), ref("B"), lit("x"), ref("C")},
	} {
		if got := parse(in); !slices.Equal(got, want) {
			t.Errorf("parse(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// A spec's description for logs names the keys that matter for its
// transport (a child's env keys, a remote's header keys) and a short
// digest, and never a value.
func TestResolvedStringNamesKeysNotValues(t *testing.T) {
	stdio := Resolved{Name: "gh", Transport: TransportStdio, Command: "github-mcp-server", Args: []string{"stdio", "--token=s3cret-arg"},
		Env: map[string]string{"GITHUB_TOKEN": "s3cret-env"}, Headers: map[string]string{"X-Ignored": "s3cret-hdr"},
		Digest: "0123456789abcdef0123"}
	remote := Resolved{Name: "search", Transport: TransportHTTP, URL: "https://s3cret-url.example/mcp",
		Env: map[string]string{"IGNORED": "s3cret-env"}, Headers: map[string]string{"Authorization": "Bearer s3cret-hdr"},
		Digest: "0123456789ab"}
	for _, tc := range []struct {
		r    Resolved
		want string
	}{
		{stdio, `upstream "gh" (stdio, command "github-mcp-server", 2 args, keys [GITHUB_TOKEN], omitted [], digest 0123456789ab)`},
		{remote, `upstream "search" (http, command "", 0 args, keys [Authorization], omitted [], digest 0123456789ab)`},
		{Resolved{Name: "short", Transport: TransportSSE, Digest: "abc"}, `upstream "short" (sse, command "", 0 args, keys [], omitted [], digest abc)`},
	} {
		for _, got := range []string{tc.r.String(), fmt.Sprintf("%#v", tc.r)} {
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Errorf("a value in %s", got)
			}
		}
	}
}
