package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/crewlet/hub/authority"
)

// A coding CLI runs in the same box as the builtin agent, held to the same
// limits, its model reached through the box's model gateway. Adding
// another CLI is a case in cliCommand and its event reader (see
// docs/sandbox.md).

// CLITask is one task handed to a coding CLI.
type CLITask struct {
	// Prompt is the task, as the seat put it.
	Prompt string
	// Model is the model's name at the provider.
	Model string
	// Provider is where the model is; the box reaches it only through
	// its gateway (ServeModel), which this run opens. A call its Meter
	// refuses stops the run, as a refused model call ends a turn.
	Provider Provider
}

// CLIResult is how a CLI's run ended: the run itself (its transcript is
// the CLI's JSON event stream, clipped as any run's), and the CLI's final
// message as the report.
type CLIResult struct {
	Result
	// Report is the CLI's last message, whole.
	Report string
	// Events counts the events the CLI wrote.
	Events int
}

// opencodeProvider is the provider's name in the configuration OpenCode is
// given; the model is "crewlet/<model>".
const opencodeProvider = "crewlet"

// forwarder is run by node inside the box: it listens on the box's own
// loopback at the gateway's port, joins each connection to the gateway's
// socket, and only then starts the CLI (argv after the script's own
// arguments), ending with it — so the CLI's first model call finds it
// listening, with no wait guessed.
const forwarder = `const net = require("net"), cp = require("child_process");
const [sock, port, ...argv] = process.argv.slice(1);
const srv = net.createServer(c => { const u = net.connect(sock); c.pipe(u); u.pipe(c);
  c.on("error", () => u.destroy()); u.on("error", () => c.destroy()); });
srv.listen(Number(port), "127.0.0.1", () => {
  const child = cp.spawn(argv[0], argv.slice(1), { stdio: "inherit" });
  child.on("exit", (code, sig) => process.exit(code === null ? 128 + (require("os").constants.signals[sig] || 0) : code));
  child.on("error", e => { process.stderr.write(String(e) + "\n"); process.exit(127); });
});`

// RunCLI runs the box's configured coding CLI on task, in the workspace,
// until it ends or a limit stops it.
func (b *Box) RunCLI(ctx context.Context, task CLITask) (CLIResult, error) {
	spec := b.cfg.Agent
	if spec.Builtin() {
		return CLIResult{}, errors.New("the box's agent is the builtin one, not a coding CLI")
	}
	command := spec.Command // found by Open
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	p := task.Provider
	if meter := p.Meter; meter != nil {
		p.Meter = func(n int) (func(ModelCall), error) {
			done, err := meter(n)
			if err != nil {
				stop(err)
			}
			return done, err
		}
	}
	if err := b.ServeModel(p); err != nil {
		return CLIResult{}, err
	}
	argv, env, events, err := cliCommand(spec, command, task)
	if err != nil {
		return CLIResult{}, err
	}
	argv = append([]string{"node", "-e", forwarder, GatewaySocket, strconv.Itoa(GatewayPort)}, argv...)
	res, err := b.run(ctx, argv, nil, runOptions{raw: events, env: env})
	// Every call the CLI made is told to the meter before the run ends:
	// the CLI is gone, so a call still in flight ends as its connection
	// does.
	b.gateway.drain()
	out := CLIResult{Result: res, Events: events.count}
	if refused := context.Cause(ctx); refused != nil && !errors.Is(refused, context.Canceled) && !errors.Is(refused, context.DeadlineExceeded) {
		return out, refused
	}
	if err != nil {
		return out, err
	}
	if events.tooLong > 0 {
		return out, authority.Refuse(authority.Invalid, "the coding CLI wrote a line of %d bytes, past the %d MiB one report, question or result line may hold; its report is not read.", events.tooLong, MaxLine>>20).WithData("limit", MaxLine)
	}
	out.Report = events.report()
	return out, nil
}

// cliCommand is the argv and environment that run spec's CLI on task, and
// the reader of its event stream.
func cliCommand(spec AgentSpec, command string, task CLITask) ([]string, []string, *eventReader, error) {
	switch spec.CLI {
	case "opencode":
		cfg := map[string]any{
			"$schema": "https://opencode.ai/config.json",
			"provider": map[string]any{opencodeProvider: map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Crewlet",
				"options": map[string]any{
					"baseURL": fmt.Sprintf("http://127.0.0.1:%d/v1", GatewayPort),
					// A placeholder: the gateway adds the provider's key.
					"apiKey": "set-by-the-gateway",
				},
				"models": map[string]any{task.Model: map[string]any{"name": task.Model, "tool_call": true}},
			}},
			"model":      opencodeProvider + "/" + task.Model,
			"autoupdate": false,
			"share":      "disabled",
			// The box is the boundary: inside it, the CLI acts without
			// asking, since nobody is at its terminal to answer.
			"permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "deny"},
		}
		raw, err := json.Marshal(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		argv := append([]string{command, "run", "--format", "json", "--pure"}, spec.Args...)
		// After "--" the task is the message even where it begins with
		// a dash ("-m other/model fix the bug" is words, not options).
		argv = append(argv, "--", task.Prompt)
		env := []string{
			"OPENCODE_CONFIG_CONTENT=" + string(raw),
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
			"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		}
		return argv, env, &eventReader{text: opencodeText}, nil
	}
	return nil, nil, nil, fmt.Errorf("%q is not a coding CLI this hub runs", spec.CLI)
}

// opencodeText reads one OpenCode event: a text part of a message carries
// its message's id and text.
func opencodeText(line []byte) (message, text string, ok bool) {
	var ev struct {
		Type string `json:"type"`
		Part struct {
			MessageID string `json:"messageID"`
			Text      string `json:"text"`
		} `json:"part"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Type != "text" {
		return "", "", false
	}
	return ev.Part.MessageID, ev.Part.Text, true
}

// eventReader reads a CLI's event stream a line at a time as it is
// written, keeping the text of the last message that had any: the
// transcript keeps only the stream's head and tail, and the report must
// be whole. A line past MaxLine is not read, only measured.
type eventReader struct {
	text    func(line []byte) (message, text string, ok bool)
	line    []byte
	skip    int64 // bytes of a line past MaxLine so far
	tooLong int64
	count   int
	lastMsg string
	last    []string
}

func (r *eventReader) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if r.skip > 0 || len(r.line)+len(chunk) > MaxLine {
			r.skip += int64(len(r.line) + len(chunk))
			r.line = r.line[:0]
		} else {
			r.line = append(r.line, chunk...)
		}
		if i < 0 {
			break
		}
		r.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (r *eventReader) endLine() {
	defer func() { r.line, r.skip = r.line[:0], 0 }()
	if r.skip > 0 {
		r.tooLong = max(r.tooLong, r.skip)
		return
	}
	if len(bytes.TrimSpace(r.line)) == 0 {
		return
	}
	r.count++
	msg, text, ok := r.text(r.line)
	if !ok {
		return
	}
	if msg != r.lastMsg {
		r.lastMsg, r.last = msg, nil
	}
	r.last = append(r.last, text)
}

// report is the last message's text, its parts joined.
func (r *eventReader) report() string {
	if len(r.line) > 0 && r.skip == 0 {
		r.endLine() // an unended last event
	}
	var b bytes.Buffer
	for i, t := range r.last {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(t)
	}
	return b.String()
}
