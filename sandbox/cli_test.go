package sandbox

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
	"github.com/crewlet/hub/sandbox/sandboxtest"
)

// Issue 38, item 4: the real OpenCode, in a real box without network,
// pointed at a stand-in OpenAI-compatible model through the box's model
// gateway, writes a script and runs it; its JSON events are the run's
// transcript and its final message the report. The provider's key reaches
// the provider and never the box.
func TestOpenCodeWritesAndRunsAScriptInTheBox(t *testing.T) {
	bin := sandboxtest.OpenCode(t)
	m := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if !c.Offers("bash") {
			return modeltest.Reply{Text: "Hello script"} // the session's title
		}
		switch c.Round() {
		case 0:
			return modeltest.Reply{Calls: []modeltest.Call{{ID: "w1", Name: "write",
				Args: map[string]any{"filePath": "hello.sh", "content": "#!/bin/sh\necho \"hello from $(hostname) in $(pwd)\"\necho \"key: ${OPENAI_API_KEY:-none}\"\n"}}}}
		case 1:
			return modeltest.Reply{Calls: []modeltest.Call{{ID: "b1", Name: "bash",
				Args: map[string]any{"command": "sh hello.sh", "description": "run the script"}}}}
		}
		return modeltest.Reply{Text: "Done: the script printed its greeting."}
	})
	b := openBox(t, Config{Agent: AgentSpec{CLI: "opencode", Command: bin}, Limits: Limits{Wall: 3 * time.Minute}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := b.RunCLI(ctx, CLITask{Prompt: "Write hello.sh that greets, and run it.", Model: "stand-in",
		Provider: Provider{BaseURL: m.OpenAIBase(), Header: http.Header{"Authorization": {"Bearer sk-provider-key"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 0 || res.Killed != "" {
		t.Fatalf("exit %d, killed %q, stderr:\n%s", res.Exit, res.Killed, res.Stderr)
	}
	if res.Report != "Done: the script printed its greeting." {
		t.Fatalf("report %q; transcript:\n%s", res.Report, res.Transcript)
	}
	if !strings.Contains(res.Transcript, `"type":"tool_use"`) || res.Events < 6 {
		t.Fatalf("the transcript is not the CLI's event stream (%d events):\n%s", res.Events, res.Transcript)
	}
	script, err := b.ReadFile("hello.sh")
	if err != nil || !strings.Contains(string(script), "hello from") {
		t.Fatalf("the script is not in the workspace: %q %v", script, err)
	}
	var ran string
	for _, c := range m.Requests() {
		for _, r := range c.Results() {
			if r.CallID == "b1" {
				ran = r.Text
			}
		}
		if got := c.Header.Get("Authorization"); got != "Bearer sk-provider-key" {
			t.Fatalf("the provider was called with Authorization %q", got)
		}
	}
	if !strings.Contains(ran, "hello from box in "+Workspace) || !strings.Contains(ran, "key: none") {
		t.Fatalf("the script did not run in the box, or saw a key: %q", ran)
	}
}

// A task that begins with a dash is the task, not options of the CLI's:
// "-m other/model fix the bug" reaches the model as the task's words, and
// the run stays on the run's model.
func TestOpenCodeTaskStartingWithADashIsTheTask(t *testing.T) {
	bin := sandboxtest.OpenCode(t)
	const task = "-m other/model fix the bug"
	m := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if !c.Offers("bash") {
			return modeltest.Reply{Text: "A title"}
		}
		return modeltest.Reply{Text: "Read the task."}
	})
	b := openBox(t, Config{Agent: AgentSpec{CLI: "opencode", Command: bin}, Limits: Limits{Wall: 3 * time.Minute}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := b.RunCLI(ctx, CLITask{Prompt: task, Model: "stand-in", Provider: Provider{BaseURL: m.OpenAIBase()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 0 || res.Report != "Read the task." {
		t.Fatalf("exit %d, report %q, stderr:\n%s", res.Exit, res.Report, res.Stderr)
	}
	var asked bool
	for _, c := range m.Requests() {
		if c.Model != "stand-in" {
			t.Fatalf("the CLI asked model %q, not the run's", c.Model)
		}
		if c.Offers("bash") {
			asked = true
			if !strings.Contains(c.UserText(), task) {
				t.Fatalf("the model was not handed the task; it read %q", c.UserText())
			}
		}
	}
	if !asked {
		t.Fatal("the CLI never asked the model to work on the task")
	}
}

// A box for a CLI the node does not have is refused as it opens, saying
// where it was looked for.
func TestOpenRefusesAMissingCLI(t *testing.T) {
	_, err := Open(context.Background(), Config{Agent: AgentSpec{CLI: "opencode", Command: "/nonexistent/opencode"}}, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "the coding CLI opencode is not at /nonexistent/opencode (sandbox.agent.command)") {
		t.Fatalf("%v", err)
	}
	// a PATH with the box's own tools and nothing else
	bin := t.TempDir()
	for _, tool := range []string{"bwrap", "prlimit"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	_, err = Open(context.Background(), Config{Agent: AgentSpec{CLI: "opencode"}}, t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "not on the hub's PATH") {
		t.Fatalf("%v", err)
	}
}
