package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The TypeScript SDK client (tsclient/client.mjs), a peer the e2e tests
// drive (see peers_test.go): the calls it makes and what it answers.

// tsCall is one tools/call the TS client makes.
type tsCall struct {
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	// Signal, on a step of its own, creates this file; WaitFor waits
	// until it exists.
	Signal  string `json:"signal,omitempty"`
	WaitFor string `json:"waitFor,omitempty"`
}

// tsOutput is what client.mjs prints. ConnectError/Status are set only when
// initialize failed (client exit status 2); everything else is then empty.
type tsOutput struct {
	ConnectError string `json:"connectError,omitempty"`
	Status       int    `json:"status,omitempty"` // HTTP status of the failed connect, if known
	ConnectCode  int    `json:"code,omitempty"`   // JSON-RPC code of the failed connect, if any

	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      tsServerInfo   `json:"serverInfo"`
	Capabilities    map[string]any `json:"capabilities"`
	Instructions    string         `json:"instructions"`
	Tools           []tsTool       `json:"tools"`
	ToolsError      *tsError       `json:"toolsError,omitempty"`
	Results         []tsResult     `json:"results"`
	// SessionIDs is the Mcp-Session-Id after connecting and after each
	// step ("" for none).
	SessionIDs []string `json:"sessionIds"`
	// SessionEnded says whether the DELETE that ends the session was
	// answered within 5 s.
	SessionEnded bool `json:"sessionEnded"`
}

type tsServerInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// tsTool is one entry of the tools/list result; Raw keeps it verbatim for
// assertions on fields not modelled here.
type tsTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  map[string]any  `json:"annotations,omitempty"`
	Raw          json.RawMessage `json:"-"`
}

func (tt *tsTool) UnmarshalJSON(b []byte) error {
	type plain tsTool
	if err := json.Unmarshal(b, (*plain)(tt)); err != nil {
		return err
	}
	tt.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// tsError describes a request that threw in the TS client. Kind is "http"
// (Code is an HTTP status, if known), "jsonrpc" (Code is a JSON-RPC error
// code) or "other".
type tsError struct {
	Error string `json:"error"`
	Code  int    `json:"code,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// tsResult is either a CallToolResult (Error empty) or a thrown error.
type tsResult struct {
	Content           []tsContent     `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	tsError
	Raw json.RawMessage `json:"-"`
}

func (r *tsResult) UnmarshalJSON(b []byte) error {
	type plain tsResult
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	r.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// Threw reports whether the call threw instead of returning a CallToolResult.
func (r tsResult) Threw() bool { return r.Error != "" }

// Text joins the text content blocks of a result.
func (r tsResult) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

type tsContent struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	MimeType string          `json:"mimeType,omitempty"`
	Data     string          `json:"data,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
}

// ToolNames returns the listed tool names, sorted.
func (o tsOutput) ToolNames() []string {
	names := make([]string, 0, len(o.Tools))
	for _, tt := range o.Tools {
		names = append(names, tt.Name)
	}
	sort.Strings(names)
	return names
}

// Tool returns the listed tool with the given name.
func (o tsOutput) Tool(name string) (tsTool, bool) {
	for _, tt := range o.Tools {
		if tt.Name == name {
			return tt, true
		}
	}
	return tsTool{}, false
}

// runTSClient connects the TypeScript SDK client to url with a bearer token,
// lists tools, makes the calls in order and returns what it saw. It fails the
// test if the client could not connect; use runTSClientRaw to assert on
// connect failures (e.g. a 401 without a token).
func runTSClient(t testing.TB, url, token string, calls []tsCall) tsOutput {
	t.Helper()
	out := runTSClientRaw(t, url, token, calls)
	if out.ConnectError != "" {
		t.Fatalf("e2e: TS SDK client could not connect to %s: %s (HTTP status %d)", url, out.ConnectError, out.Status)
	}
	return out
}

// runTSClientRaw is runTSClient without the connect check: a failed connect
// comes back as ConnectError/Status instead of failing the test. Anything else
// going wrong (bad output, crash, timeout) still fails the test. env is
// added to Node's environment (NODE_EXTRA_CA_CERTS, for a hub on HTTPS).
func runTSClientRaw(t testing.TB, url, token string, calls []tsCall, env ...string) tsOutput {
	t.Helper()
	node := pinnedNode(t)
	script := filepath.Join(e2eDir(t), "tsclient", "client.mjs")
	if calls == nil {
		calls = []tsCall{}
	}
	stdin, err := json.Marshal(map[string]any{"calls": calls, "timeoutMs": tsRequestTimeout.Milliseconds()})
	if err != nil {
		t.Fatalf("e2e: encoding TS client script: %v", err)
	}
	stderrPath := filepath.Join(t.TempDir(), "tsclient.stderr")
	stderrFile, err := os.Create(stderrPath)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	defer stderrFile.Close()
	var stdout bytes.Buffer
	// initialize + a couple of tools/list pages + the calls, and slack for Node.
	processTimeout := tsRequestTimeout*time.Duration(len(calls)+3) + 15*time.Second
	cmd, ctx, cancel := boundedCommand(t.Context(), processTimeout, node, script, url, token)
	defer cancel()
	cmd.Env = nodeEnv(t, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = &stdout
	cmd.Stderr = stderrFile
	timedOut, runErr := runBounded(cmd, ctx)
	code := exitCode(runErr)
	if timedOut {
		t.Fatalf("e2e: TS SDK client against %s timed out after %s; stderr:\n%s", url, processTimeout, tailFile(stderrPath, 30))
	}
	if code != 0 && code != 2 {
		t.Fatalf("e2e: TS SDK client against %s exited with %d (%v); stderr:\n%s", url, code, runErr, tailFile(stderrPath, 30))
	}
	var out tsOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("e2e: TS SDK client printed something that is not one JSON object (%v):\n%s\nstderr:\n%s",
			err, stdout.String(), tailFile(stderrPath, 30))
	}
	if code == 2 && out.ConnectError == "" {
		t.Fatalf("e2e: TS SDK client exited 2 without a connectError: %s", stdout.String())
	}
	if code == 0 && len(out.Results) != len(calls) {
		t.Fatalf("e2e: TS SDK client returned %d results for %d calls", len(out.Results), len(calls))
	}
	return out
}
