package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crewlet/hub/agent-runtime/modeltest"
)

// The Quickstart is the README's promise to a newcomer; this test keeps it.
// It runs the commands of the Quickstart's shell blocks as the README
// writes them, in order, and changes only what a test on a shared machine
// must: the model endpoint the newcomer brings becomes a stand-in
// OpenAI-compatible server on loopback, and the hub's fixed port becomes a
// free one. An edit that breaks a step breaks this test.

const (
	// quickstartModel is the endpoint the Quickstart's company points at
	// (Ollama's); the test's stand-in model takes its place.
	quickstartModel = "http://127.0.0.1:11434/v1"
	// quickstartHub is where the Quickstart's requests reach the hub.
	quickstartHub = "127.0.0.1:8420"
	// quickstartReply is what the stand-in model has the seat comment.
	quickstartReply = "Hello from the assistant: the quickstart reached me."
)

// quickstartBlocks is the text of each fenced sh block under the README's
// Quickstart heading, in order, its list indentation removed.
func quickstartBlocks(t *testing.T, readme string) []string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in, fenced, indent := false, false, ""
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case !fenced && strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == "Quickstart"
		case !in:
		case !fenced && strings.TrimSpace(line) == "```sh":
			fenced, cur = true, nil
			indent = line[:strings.Index(line, "```")]
		case fenced && strings.TrimSpace(line) == "```":
			fenced = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case fenced:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no ```sh blocks under a \"## Quickstart\" heading", readme)
	}
	return blocks
}

// Issue 29: a newcomer follows the README's Quickstart from a clone to an
// AI seat's comment on a work item. Every block runs as written, with
// bash, in a fresh directory (the one that installs the command, in the
// clone, into the test's own bin): the company it writes gives the seat
// the stand-in model, so serve names no seat without a model; the item
// filed by the Quickstart's request wakes the seat, whose model calls the
// tracker's comment tool; and the Quickstart's last command, the read,
// shows that comment by the seat on the item.
func TestQuickstartReachesASeatsComment(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := quickstartBlocks(t, filepath.Join(repo, "README.md"))
	all := strings.Join(blocks, "")
	for _, want := range []string{quickstartModel, quickstartHub, "crewlet serve"} {
		if !strings.Contains(all, want) {
			t.Fatalf("the Quickstart no longer names %q, which this test stands in for:\n%s", want, all)
		}
	}

	// The stand-in model: asked about an item, it has the seat comment
	// on it, then ends the turn.
	itemKey := regexp.MustCompile(`CORE-[0-9]+`)
	model := modeltest.Start(t, func(c modeltest.Conversation) modeltest.Reply {
		if c.Round() == 0 && c.Offers("comment_on_work_item") {
			return modeltest.Reply{Calls: []modeltest.Call{{Name: "comment_on_work_item",
				Args: map[string]any{"key": itemKey.FindString(c.UserText()), "body": quickstartReply}}}}
		}
		return modeltest.Reply{Text: "Said hello on the item."}
	})

	bin, work := t.TempDir(), t.TempDir()
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "GOBIN=" + bin}
	for _, kv := range os.Environ() {
		// The generated token is part of the walk: one from the
		// environment would skip it.
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "GOBIN=") && !strings.HasPrefix(kv, "CREWLET_OPERATOR_TOKEN=") {
			env = append(env, kv)
		}
	}

	var hub *hubProc
	var out string
	for i, block := range blocks {
		block = strings.ReplaceAll(block, quickstartModel, model.OpenAIBase())
		last := i == len(blocks)-1
		switch {
		case strings.Contains(block, "crewlet serve"):
			// The one step that does not end: run in the background
			// on a free port, as the newcomer leaves it running.
			hub = startQuickstartHub(t, work, env, strings.ReplaceAll(block, "crewlet serve", "crewlet serve --listen 127.0.0.1:0"))
			for _, line := range hub.stdout {
				if strings.Contains(line, "has no model") {
					t.Fatalf("serve says a seat has no model on the Quickstart's company:\n%s", strings.Join(hub.stdout, "\n"))
				}
			}
			continue
		case hub != nil:
			block = strings.ReplaceAll(block, quickstartHub, hub.addr)
		}
		if last {
			// The newcomer reads the item once the turn has ended; the
			// model's second round is asked after its comment landed.
			if hub == nil {
				t.Fatal("the Quickstart reads the item without having started the hub")
			}
			if err := model.WaitFor(ctxT(t), 2); err != nil {
				t.Fatalf("the seat's turn did not reach the model twice: %v; hub log:\n%s", err, hub.logs())
			}
		}
		dir, within := work, time.Minute
		if strings.Contains(block, "./cmd/") {
			// A step that builds from the source runs in the clone.
			dir, within = repo, 10*time.Minute
		}
		out = runQuickstartStep(t, i+1, block, dir, env, within)
	}
	if hub == nil {
		t.Fatal("the Quickstart never starts the hub (no `crewlet serve` block)")
	}
	if !seatCommented(out, quickstartReply) {
		t.Fatalf("the Quickstart's last command does not show the seat's comment:\n%s\nhub log:\n%s", out, hub.logs())
	}
}

// runQuickstartStep runs one block with bash, failing on the first command
// that fails, and answers its stdout.
func runQuickstartStep(t *testing.T, n int, block, dir string, env []string, within time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = dir, env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Quickstart step %d failed: %v\n%s\nstdout:\n%s\nstderr:\n%s", n, err, block, out, stderr.String())
	}
	return string(out)
}

// startQuickstartHub runs the serve block in dir, in its own process
// group, and waits for its banner. Its data is the default ./.crewlet
// under dir, where the Quickstart's requests read the token.
func startQuickstartHub(t *testing.T, dir string, env []string, block string) *hubProc {
	t.Helper()
	h := &hubProc{dataDir: filepath.Join(dir, ".crewlet")}
	stderr, err := os.CreateTemp(t.TempDir(), "stderr-*.log")
	if err != nil {
		t.Fatal(err)
	}
	h.stderr = stderr
	cmd := exec.Command("bash", "-eo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd = cmd
	// Registered before stop, so it runs after: whatever the block left
	// in its group once the hub stopped cleanly (bash runs a lone command
	// in its own place, so nothing, as a rule) goes too.
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	h.lines = make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() { h.stop(t) })
	h.awaitReady(t, 30*time.Second)
	return h
}

// seatCommented reads an /operator/act answer to get_work_item and says
// whether the item's thread holds a comment by the assistant seat saying
// body.
func seatCommented(answer, body string) bool {
	var res struct {
		StructuredContent struct {
			Item struct {
				Thread []struct {
					By   string `json:"by"`
					Body string `json:"body"`
				} `json:"thread"`
			} `json:"item"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal([]byte(answer), &res) != nil {
		return false
	}
	for _, c := range res.StructuredContent.Item.Thread {
		if c.By == "assistant" && strings.Contains(c.Body, body) {
			return true
		}
	}
	return false
}
