package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Issue 25 defect 8: one message past the bound (a JSON body, one event of
// a stream) is refused as such, not gathered without end.
func TestAnswerPastTheBoundIsRefused(t *testing.T) {
	big := func(sse bool) fault {
		return func(w http.ResponseWriter, id json.RawMessage) {
			head := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				head = "data: " + head
			} else {
				w.Header().Set("Content-Type", "application/json")
			}
			_, _ = io.WriteString(w, head)
			chunk := strings.Repeat("x", 1<<20)
			for range maxMessage>>20 + 1 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}]}}`)
			if sse {
				_, _ = io.WriteString(w, "\n\n")
			}
		}
	}
	g := startRig(t, false, map[string]fault{"big_json": big(false), "big_event": big(true)})
	in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, false)
	for _, tool := range []string{"big_json", "big_event"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
		cancel()
		wantUnreadable(t, err, "larger than the 16 MiB")
	}
	if text, err := callText(t, in, "echo", `{"text":"still up"}`); err != nil || text != "still up" {
		t.Fatalf("after answers past the bound: %q %v", text, err)
	}
}

// Issue 25 defect 5 (FuzzTransparency, stop 32's third finding): a stdio
// server's answer whose one line is past the 16 MiB bound is refused as
// the server's unreadable answer, past the bound, the same words as over
// HTTP, and never as retryable; the child is not taken down, since the
// line is read to its end and the next begins in step, whether the id
// comes before the result or after it. An answer just under the bound is
// answered whole.
func TestStdioAnswerPastTheBoundIsUnreadable(t *testing.T) {
	for _, order := range []string{"id-first", "id-last"} {
		t.Run(order, func(t *testing.T) {
			in := rigInstance(t, testSpec(t, "legacy", map[string]string{"UPSTREAM_SIZED": order}), false)
			pid := in.childPID()
			call := func(size int) (json.RawMessage, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				raw, _, err := in.CallRaw(ctx, "old_tool", json.RawMessage(fmt.Sprintf(`{"bytes":%d}`, size)))
				return raw, err
			}
			// Just past the bound, and well past it (the rest of the line
			// read in pieces after the bound): an instance whose session
			// had ended would answer the second call as down (its restart
			// is an hour away).
			for _, size := range []int{maxMessage, maxMessage + 1<<20} {
				_, err := call(size)
				wantUnreadable(t, err, "larger than the 16 MiB")
			}
			// The response around the text is under a hundred bytes.
			raw, err := call(maxMessage - 100)
			if err != nil || len(raw) < maxMessage-100 {
				t.Fatalf("an answer just under the bound: %d bytes, %v", len(raw), err)
			}
			if got := in.childPID(); got != pid {
				t.Fatalf("the child was restarted (pid %d, then %d)", pid, got)
			}
		})
	}
}
