package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/sandbox"
	"github.com/crewlet/hub/servers"
)

// The builtin coding agent's tools: each call is one real operation in
// the run's box, declared from its arguments' struct like any typed tool,
// and offered to the run's model only (never to a turn or the hub).

// codingSystem is what the coding agent is told; %s is its seat.
const codingSystem = `You are the coding agent @%s started for one code task. You work in a fresh workspace (a git repository) in a sandbox with no network: ` +
	`write_file, read_file and list_files work on its files (paths relative to the workspace), run_command runs a shell command there and answers its output. ` +
	`Commit what you deliver with git in the workspace; your commits are handed back. ` +
	`If you cannot go on without a person's decision, call ask_person with one question; the run waits for the answer. ` +
	`When the task is done, or cannot be done, call finish with your report: what you did, what the commands printed that matters, and what is left.`

type writeFileIn struct {
	Path    string `json:"path" jsonschema:"the file's path, relative to the workspace; its directories are made"`
	Content string `json:"content" jsonschema:"the file's whole content"`
}

// maxBoxReadBytes bounds what read_file and list_files answer: each
// answer stays in the run's conversation and is sent again every round,
// so a longer one is read in parts (offset and length, skip).
const maxBoxReadBytes = 256 << 10

type readFileIn struct {
	Path   string `json:"path" jsonschema:"the file's path, relative to the workspace"`
	Offset int    `json:"offset,omitempty" jsonschema:"the byte to start reading at; 0 if omitted"`
	Length int    `json:"length,omitempty" jsonschema:"how many bytes to read, at most 262144; to the file's end if omitted"`
}

type listFilesIn struct {
	Path string `json:"path,omitempty" jsonschema:"a directory relative to the workspace; the workspace itself if empty"`
	Skip int    `json:"skip,omitempty" jsonschema:"how many entries to pass over, to list on where a long listing stopped"`
}

type runCommandIn struct {
	Command string `json:"command" jsonschema:"a shell command, run with sh -c in the workspace"`
}

type askPersonIn struct {
	Question string `json:"question" jsonschema:"one question, complete in itself, for the person the task is for; at most 4000 bytes"`
}

type finishIn struct {
	Report string `json:"report" jsonschema:"what you did and found, for the turn that started you; at most 64 KiB"`
}

// boxTool is one of the coding agent's tools: its declaration and its
// operation, which answers its result and whether the run stops there.
type boxTool struct {
	name, description string
	schema            func() (*jsonschema.Schema, error)
	do                func(ctx context.Context, cr *codeRun, args json.RawMessage) (string, bool, error)
}

// boxToolOf declares a box tool from its arguments' struct.
func boxToolOf[In any](name, description string, do func(ctx context.Context, cr *codeRun, in In) (string, bool, error)) boxTool {
	return boxTool{name: name, description: description,
		schema: func() (*jsonschema.Schema, error) { return jsonschema.For[In](nil) },
		do: func(ctx context.Context, cr *codeRun, args json.RawMessage) (string, bool, error) {
			var in In
			if err := json.Unmarshal(args, &in); err != nil {
				return "", false, authority.Refuse(authority.Invalid, "The arguments of %s could not be read: %v.", name, err)
			}
			return do(ctx, cr, in)
		}}
}

// boxTools is the coding agent's tool table.
var boxTools = []boxTool{
	boxToolOf("write_file", "Write a file in the workspace, replacing it if it exists.",
		func(_ context.Context, cr *codeRun, in writeFileIn) (string, bool, error) {
			if err := cr.box.WriteFile(in.Path, []byte(in.Content)); err != nil {
				return "", false, err
			}
			return fmt.Sprintf("Wrote %s (%d bytes).", in.Path, len(in.Content)), false, nil
		}),
	boxToolOf("read_file", "Read a file of the workspace: whole, or the part offset and length say (in bytes). A read answers at most 256 KiB (262144 bytes); a longer file is read in parts.",
		readFile),
	boxToolOf("list_files", "List the files under a directory of the workspace, with their sizes, in path order. A listing answers at most 256 KiB; a longer one stops at a whole line and says the skip to list on with.",
		listFiles),
	boxToolOf("run_command", "Run a shell command in the workspace and read what it printed: its exit status, its output in whole lines (a long output's middle is counted, not shown) and the end of its error stream.",
		func(ctx context.Context, cr *codeRun, in runCommandIn) (string, bool, error) {
			if strings.TrimSpace(in.Command) == "" {
				return "", false, authority.Refuse(authority.Invalid, "command is empty; give a shell command.")
			}
			res, err := cr.box.Run(ctx, []string{"sh", "-c", in.Command}, nil)
			if err != nil {
				return "", false, err
			}
			return commandText(res), false, nil
		}),
	boxToolOf("ask_person", "Ask the person the task is for one question and wait: the run parks until they answer, and their answer is this call's result.",
		func(_ context.Context, _ *codeRun, in askPersonIn) (string, bool, error) {
			q := strings.TrimSpace(in.Question)
			switch {
			case q == "":
				return "", false, authority.Refuse(authority.Invalid, "question is empty; ask one question.")
			case len(q) > maxRunQuestionBytes:
				return "", false, authority.Refuse(authority.Invalid, "question is %d bytes, past the limit of %d; ask it shorter.", len(q), maxRunQuestionBytes)
			}
			return q, true, nil
		}),
	boxToolOf("finish", "End the run with your report; nothing runs after it.",
		func(_ context.Context, _ *codeRun, in finishIn) (string, bool, error) {
			r := strings.TrimSpace(in.Report)
			switch {
			case r == "":
				return "", false, authority.Refuse(authority.Invalid, "report is empty; say what you did.")
			case len(r) > maxReportBytes:
				return "", false, authority.Refuse(authority.Invalid, "report is %d bytes, past the limit of %d; say it shorter.", len(r), maxReportBytes)
			}
			return r, true, nil
		}),
}

// readFile is read_file: the file whole, or the part asked for; a part
// past maxBoxReadBytes is refused, saying how to read it in parts, never
// cut where the agent did not ask.
func readFile(_ context.Context, cr *codeRun, in readFileIn) (string, bool, error) {
	if in.Offset < 0 || in.Length < 0 {
		return "", false, authority.Refuse(authority.Invalid, "offset and length are counts of bytes, 0 or more.")
	}
	if in.Length > maxBoxReadBytes {
		return "", false, authority.Refuse(authority.Invalid, "length is %d bytes, past the %d one read answers; read the file in parts of at most %d.", in.Length, maxBoxReadBytes, maxBoxReadBytes)
	}
	b, err := cr.box.ReadFile(in.Path)
	if err != nil {
		return "", false, err
	}
	if in.Offset > len(b) {
		return "", false, authority.Refuse(authority.Invalid, "offset %d is past the end of %s, which is %d bytes.", in.Offset, in.Path, len(b))
	}
	part := b[in.Offset:]
	switch {
	case in.Length > 0:
		part = part[:min(in.Length, len(part))]
	case len(part) > maxBoxReadBytes:
		return "", false, authority.Refuse(authority.Invalid,
			"%s is %d bytes (%d from byte %d), past the %d one read answers; read it in parts with offset and length (at most %d each), or pick out what you need with run_command (grep, sed -n).",
			in.Path, len(b), len(part), in.Offset, maxBoxReadBytes, maxBoxReadBytes)
	}
	return string(part), false, nil
}

// listFiles is list_files: whole lines, in path order (so skip lists on
// where a clipped listing stopped), up to maxBoxReadBytes with the last
// line saying how many entries are left and the skip to list them with.
func listFiles(ctx context.Context, cr *codeRun, in listFilesIn) (string, bool, error) {
	if in.Skip < 0 {
		return "", false, authority.Refuse(authority.Invalid, "skip is a count of entries, 0 or more.")
	}
	entries, err := cr.box.List(ctx, in.Path)
	if err != nil {
		return "", false, err
	}
	if len(entries) == 0 {
		return "Nothing is there.", false, nil
	}
	if in.Skip >= len(entries) {
		return "", false, authority.Refuse(authority.Invalid, "There are %d entries there; skip %d passes them all.", len(entries), in.Skip)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	// Room is kept for the line that says where the listing stopped.
	const tailRoom = 256
	var b strings.Builder
	for i, e := range entries[in.Skip:] {
		line := fmt.Sprintf("%s\t%s\t%d\n", e.Type, e.Path, e.Size)
		if b.Len()+len(line) > maxBoxReadBytes-tailRoom {
			next := in.Skip + i
			fmt.Fprintf(&b, "Listed entries %d to %d of %d (a listing answers at most %d bytes); list on with skip: %d, or list a directory under it.\n",
				in.Skip+1, next, len(entries), maxBoxReadBytes, next)
			break
		}
		b.WriteString(line)
	}
	return b.String(), false, nil
}

// commandText is a command's result as the agent reads it.
func commandText(res sandbox.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit status %d", res.Exit)
	if res.Why != "" {
		fmt.Fprintf(&b, "; %s", res.Why)
	}
	b.WriteString("\n")
	if res.Transcript != "" {
		b.WriteString("output:\n" + res.Transcript)
		if !strings.HasSuffix(res.Transcript, "\n") {
			b.WriteString("\n")
		}
	}
	if res.Stderr != "" {
		b.WriteString("error stream:\n" + res.Stderr)
	}
	return b.String()
}

var (
	boxDefsOnce sync.Once
	boxDefs     []ToolDef
)

// boxToolDefs are the box tools as the run's model is offered them.
func boxToolDefs() []ToolDef {
	boxDefsOnce.Do(func() {
		for _, bt := range boxTools {
			s, err := bt.schema()
			if err != nil {
				panic(fmt.Sprintf("box tool %s: %v", bt.name, err))
			}
			raw, err := json.Marshal(s)
			if err != nil {
				panic(fmt.Sprintf("box tool %s: %v", bt.name, err))
			}
			boxDefs = append(boxDefs, ToolDef{Name: bt.name, Description: bt.description, Schema: raw})
		}
	})
	return boxDefs
}

// boxCall runs one of the agent's calls in its box, and reports whether
// the run stops there (finish, ask_person).
func (cr *codeRun) boxCall(ctx context.Context, c ToolCall) (ToolResult, bool) {
	var tool *boxTool
	for i := range boxTools {
		if boxTools[i].name == c.Name {
			tool = &boxTools[i]
		}
	}
	if tool == nil {
		return ToolResult{CallID: c.ID, IsError: true, Text: resultText(servers.Refused(authority.Refuse(authority.NotFound,
			"A coding run has no tool %q; it has write_file, read_file, list_files, run_command, ask_person and finish.", c.Name)))}, false
	}
	text, stop, err := tool.do(ctx, cr, argsOrEmpty(c.Args))
	cr.t.log.Info("run_tool_called", "run", cr.id, "tool", c.Name, "is_error", err != nil)
	if err != nil {
		var ref *authority.Refusal
		if !errors.As(err, &ref) {
			// The box's own words: what it refused or what failed in it.
			return ToolResult{CallID: c.ID, IsError: true, Text: "The box refused: " + err.Error()}, false
		}
		return ToolResult{CallID: c.ID, IsError: true, Text: resultText(servers.Refused(ref))}, false
	}
	return ToolResult{CallID: c.ID, Text: text}, stop
}
