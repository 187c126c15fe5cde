package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzTransparency's scripted servers over stdio: the test binary itself,
// switched by scriptedVar in an init (as crashyVar switches it), before
// TestMain and its leak check. Each process reads the script of a call
// from a file the test writes in the directory scriptsVar names, so the
// hub's child and the direct client's child answer alike.
const (
	scriptedVar = "CREWLET_HUB_TEST_SCRIPTED" // the tool's name
	scriptsVar  = "CREWLET_HUB_TEST_SCRIPTS"  // the scripts' directory
	modernVar   = "CREWLET_HUB_TEST_SCRIPTED_MODERN"
)

func init() {
	tool := os.Getenv(scriptedVar)
	if tool == "" {
		return
	}
	out := &lineWriter{w: os.Stdout}
	modern := os.Getenv(modernVar) != ""
	t := &scriptedStdio{tool: tool, dir: os.Getenv(scriptsVar), out: out, modern: modern}
	if err := newScriptedMCP(tool, modern).Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "scripted:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// scriptFile is a script as the test files it for a stdio server: bytes
// as base64, so an answer that is not UTF-8 survives.
type scriptFile struct {
	Cut    bool   `json:"cut,omitempty"`
	Member string `json:"member"`
	Body   []byte `json:"body"`
	Notes  []struct {
		Method string `json:"method"`
		Params []byte `json:"params"`
	} `json:"notes,omitempty"`
}

// lineWriter serialises whole writes: the SDK writes each message as one
// line in one Write, and so does the script, so neither cuts into the
// other.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lineWriter) Close() error { return nil }

// scriptedStdio is the SDK's stdio transport with the scripted calls taken
// out before the SDK reads them: the SDK serves the handshake, the tool
// list and everything else.
type scriptedStdio struct {
	tool, dir string
	out       *lineWriter
	modern    bool
}

func (t *scriptedStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	inner, err := (&mcp.IOTransport{Reader: os.Stdin, Writer: t.out}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &scriptedConn{Connection: inner, t: t}, nil
}

type scriptedConn struct {
	mcp.Connection
	t *scriptedStdio
	// pending are the messages that came while the script waited for
	// its client's answer to a request: the SDK gets them after.
	pending []jsonrpc.Message
}

// Read answers each scripted tools/call itself, raw on stdout, and hands
// the SDK every other message.
func (c *scriptedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var msg jsonrpc.Message
		if len(c.pending) > 0 {
			msg, c.pending = c.pending[0], c.pending[1:]
		} else {
			var err error
			if msg, err = c.Connection.Read(ctx); err != nil {
				return nil, err
			}
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() || req.Method != "tools/call" || !c.answer(ctx, req) {
			return msg, nil
		}
	}
}

// await reads until the answer to the request id comes, keeping what else
// comes for the SDK, and answers what the server got back.
func (c *scriptedConn) await(ctx context.Context, id string) any {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scripted: no answer to a request:", err)
			os.Exit(4)
		}
		resp, ok := msg.(*jsonrpc.Response)
		if ok {
			raw, _ := json.Marshal(resp.ID.Raw())
			ok = string(raw) == id
		}
		if !ok {
			c.pending = append(c.pending, msg)
			continue
		}
		if resp.Error != nil {
			var e *jsonrpc.Error
			if !errors.As(resp.Error, &e) {
				return map[string]any{"error": resp.Error.Error()}
			}
			b, _ := json.Marshal(e)
			return map[string]any{"error": canonical(b)}
		}
		return map[string]any{"result": canonical(resp.Result)}
	}
}

// record files what the call with key got back, for the test to read.
func (c *scriptedConn) record(key string, got []any) {
	b, err := json.Marshal(got)
	if err == nil {
		err = os.WriteFile(filepath.Join(c.t.dir, filepath.Base(key)+".got"), b, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripted: cannot record:", err)
		os.Exit(1)
	}
}

// answer writes the script of the call, if it has one: its notes, the end
// of the notes and its response, each a line; a cut script writes half of
// the response's line and exits, as a server that crashed mid-answer.
func (c *scriptedConn) answer(ctx context.Context, req *jsonrpc.Request) bool {
	var call callOf
	if json.Unmarshal(req.Params, &call.Params) != nil || call.Params.Name != c.t.tool {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(c.t.dir, filepath.Base(call.Params.Arguments.Key)))
	if err != nil {
		return false
	}
	var f scriptFile
	if err := json.Unmarshal(raw, &f); err != nil {
		fmt.Fprintln(os.Stderr, "scripted: a script that does not read:", err)
		os.Exit(1)
	}
	sc := &script{cut: f.Cut, member: f.Member, body: f.Body}
	for _, n := range f.Notes {
		sc.notes = append(sc.notes, note{method: n.Method, params: n.Params})
	}
	id, err := json.Marshal(req.ID.Raw())
	if err != nil {
		return false
	}
	call.ID = id
	key := call.Params.Arguments.Key
	steps, resp, final := sc.wire(&call, true, c.t.modern)
	var got []any
	if c.t.modern && final && sc.asks() > 0 {
		got = inputsGot(&call)
		c.record(key, got)
	}
	for _, s := range steps {
		_, _ = c.t.out.Write(append(s.msg, '\n'))
		if s.ask != "" {
			got = append(got, c.await(ctx, s.ask))
			c.record(key, got)
		}
	}
	if sc.cut && final {
		_, _ = c.t.out.Write(resp[:len(resp)/2])
		fmt.Fprintln(os.Stderr, "scripted: cut mid-answer")
		os.Exit(3)
	}
	_, _ = c.t.out.Write(append(resp, '\n'))
	return true
}

// stdioScripted files scripts for the stdio servers of one kind: the
// hub's child and the direct client's.
type stdioScripted struct {
	dir, tool, exe string
	modern         bool
}

func newStdioScripted(tb testing.TB, name, tool string, modern bool) *rigServer {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	s := &stdioScripted{dir: tb.TempDir(), tool: tool, exe: exe, modern: modern}
	return &rigServer{name: name, tool: tool, scripts: s, stdio: true, modern: modern}
}

// env is what switches the test binary into the server.
func (s *stdioScripted) env() map[string]string {
	env := map[string]string{scriptedVar: s.tool, scriptsVar: s.dir}
	if s.modern {
		env[modernVar] = "1"
	}
	return env
}

// entry is the server's mcp_servers entry. Its env names the configured
// secret too, as the HTTP servers' header does.
func (s *stdioScripted) entry(name string) string {
	line := fmt.Sprintf("  - {name: %s, command: %q, env: {UP_KEY_SEEN: \"${UP_KEY}\"", name, s.exe)
	for k, v := range s.env() {
		line += fmt.Sprintf(", %s: %q", k, v)
	}
	return line + "}}\n"
}

// command starts another process of the server, for a client of its own.
func (s *stdioScripted) command() mcp.Transport {
	cmd := exec.Command(s.exe)
	cmd.Env = os.Environ()
	for k, v := range s.env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return &mcp.CommandTransport{Command: cmd}
}

func (s *stdioScripted) set(key string, sc *script) {
	f := scriptFile{Cut: sc.cut, Member: sc.member, Body: sc.body}
	for _, n := range sc.notes {
		f.Notes = append(f.Notes, struct {
			Method string `json:"method"`
			Params []byte `json:"params"`
		}{n.method, n.params})
	}
	b, err := json.Marshal(f)
	if err == nil {
		err = os.WriteFile(filepath.Join(s.dir, key), b, 0o600)
	}
	if err != nil {
		panic(err) // the rig's own directory: nothing a script can cause
	}
}

// got reads what the server recorded; the server writes it before it
// goes on with its script, so before its answer.
func (s *stdioScripted) got(key string) []any {
	raw, err := os.ReadFile(filepath.Join(s.dir, key+".got"))
	if err != nil {
		return nil
	}
	var got []any
	if v, ok := canonical(raw).([]any); ok {
		got = v
	}
	return got
}

func (s *stdioScripted) drop(key string) {
	_ = os.Remove(filepath.Join(s.dir, key))
	_ = os.Remove(filepath.Join(s.dir, key+".got"))
}
