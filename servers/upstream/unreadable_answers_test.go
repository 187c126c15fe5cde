//lint:file-ignore SA1019 the test plays a client of the session revisions, which still take logging.

package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deepResult is a result nested levels deep in its structured content.
func deepResult(levels int) string {
	return `{"content":[{"type":"text","text":"deep"}],"structuredContent":{"v":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}}`
}

// Issue 25 defect 5: an answer the hub cannot read (invalid UTF-8, nesting
// past the SDK's bound) is refused as the server's failure, not as a
// condition a retry clears, over HTTP (a JSON body and an event stream, on
// both revisions) and over stdio, each saying what was wrong with it; the
// server's session lives on.
func TestUnreadableAnswerIsTheServers(t *testing.T) {
	answers := []struct {
		result, why string
	}{
		{`{"content":[{"type":"text","text":"caf` + "\xff" + `"}]}`, "bytes that are not valid UTF-8"},
		{deepResult(1000), "nested 1003 levels deep"},
	}
	write := func(sse bool, result string) fault {
		return func(w http.ResponseWriter, id json.RawMessage) {
			msg := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: "+msg+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, msg)
		}
	}
	for rev, modern := range revisions {
		faults := map[string]fault{}
		tools := map[string]string{}
		for i, a := range answers {
			for _, sse := range []bool{false, true} {
				name := fmt.Sprintf("bad%d_sse_%v", i, sse)
				faults[name], tools[name] = write(sse, a.result), a.why
			}
		}
		g := startRig(t, modern, faults)
		t.Run(rev+"/http", func(t *testing.T) {
			in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, modern)
			for tool, why := range tools {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
				cancel()
				wantUnreadable(t, err, why)
			}
			if text, err := callText(t, in, "echo", `{"text":"still up"}`); err != nil || text != "still up" {
				t.Fatalf("after unreadable answers: %q %v", text, err)
			}
		})
	}
	for _, a := range answers {
		t.Run("stdio/"+a.why, func(t *testing.T) {
			in := rigInstance(t, testSpec(t, "legacy", map[string]string{"UPSTREAM_RAW_RESULT": a.result}), false)
			pid := in.childPID()
			// Twice: an instance whose session had ended would answer the
			// second call as down (its restart is an hour away).
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, _, err := in.CallRaw(ctx, "old_tool", json.RawMessage(`{}`))
				cancel()
				wantUnreadable(t, err, a.why)
			}
			if got := in.childPID(); got != pid {
				t.Fatalf("the child was restarted (pid %d, then %d)", pid, got)
			}
		})
	}
}

// logSink is a client that notes the log lines it is sent.
type logSink struct {
	scripted
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Log(_ context.Context, p *mcp.LoggingMessageParams) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(p.Data))
	return nil
}

// Issue 25 defect 5: what the server says on a call's stream before an
// answer the hub cannot read (nested too deep, past the bound) reaches the
// call's client, all of it and in order, before the call is refused; the
// SDK's client, which takes such an answer for a broken connection, would
// drop what it had read and not yet handed over.
func TestLogLinesBeforeAnUnreadableAnswerArrive(t *testing.T) {
	const lines = 8
	stream := func(answer func(w io.Writer, id json.RawMessage)) fault {
		return func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range lines {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"line %d\"}}\n\n", i)
			}
			answer(w, id)
		}
	}
	deep := stream(func(w io.Writer, id json.RawMessage) {
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", id, deepResult(1000))
	})
	big := stream(func(w io.Writer, id json.RawMessage) {
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"%s\"}]}}\n\n",
			id, strings.Repeat("x", maxMessage))
	})
	g := startRig(t, false, map[string]fault{"deep": deep, "big": big})
	in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, false)
	for tool, why := range map[string]string{"deep": "nested 1003 levels deep", "big": "larger than the 16 MiB"} {
		for round := range 10 {
			sink := &logSink{}
			ctx, cancel := context.WithTimeout(WithDownstream(context.Background(), sink), 10*time.Second)
			_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
			cancel()
			wantUnreadable(t, err, why)
			sink.mu.Lock()
			got := strings.Join(sink.lines, ",")
			sink.mu.Unlock()
			if want := "line 0,line 1,line 2,line 3,line 4,line 5,line 6,line 7"; got != want {
				t.Fatalf("%s, round %d: the client got %q before the refusal; want %q", tool, round, got, want)
			}
			if tool == "big" {
				break
			}
		}
	}
}

// Issue 36 finding 5: a stdio answer nested past the depth Go's own
// decoder reads (10,000 levels), or not JSON at all, is refused for that
// call like a shallower one, and the child stays up: same pid, no
// server_exited, and its next call is answered. The hub's guard once read
// such an answer's id with encoding/json, which gave up past 10,000
// levels, or let a malformed line through: the SDK took either for a
// broken connection and ended the child.
func TestUnreadableStdioAnswerKeepsTheChild(t *testing.T) {
	for _, a := range []struct{ name, result, why string }{
		{"deep-9000", deepResult(9000), "nested 9003 levels deep"},
		{"deep-20000", deepResult(20000), "nested 20003 levels deep"},
		{"malformed", `{"content":[{"type":"text","text":"half"}`, "not well-formed JSON"},
	} {
		t.Run(a.name, func(t *testing.T) {
			spec := testSpec(t, "legacy", map[string]string{"UPSTREAM_RAW_RESULT": a.result, "UPSTREAM_RAW_ONCE": "1"})
			in, logs := startTest(t, spec, func(o *Options) { o.Schedule = &Schedule{Base: time.Hour, Jitter: -1} })
			waitState(t, in, StateRunning, 10*time.Second)
			pid := in.childPID()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _, err := in.CallRaw(ctx, "old_tool", json.RawMessage(`{}`))
			cancel()
			wantUnreadable(t, err, a.why)
			if text, err := callText(t, in, "old_tool", `{}`); err != nil || text != "legacy answer" {
				t.Fatalf("the call after the unreadable answer: %q %v", text, err)
			}
			if got := in.childPID(); got != pid {
				t.Fatalf("the child was restarted (pid %d, then %d)", pid, got)
			}
			if ev := logs.events("server_exited"); len(ev) > 0 {
				t.Fatalf("the child was taken for exited: %v", ev)
			}
		})
	}
}
