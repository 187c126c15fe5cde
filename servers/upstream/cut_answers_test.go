package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// cutAnswer is a fault that writes the first half of a call's answer (a
// JSON body, or an event of a stream) and closes the connection under the
// rest, as a proxy or a dropped network leaves it: only that call's
// connection breaks, the server and its session go on.
func cutAnswer(sse bool) fault {
	return func(w http.ResponseWriter, id json.RawMessage) {
		msg := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"the whole answer"}]}}`
		part := msg[:len(msg)/2]
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			part = "event: message\ndata: " + part
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = io.WriteString(w, part)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
		}
	}
}

// Issue 25 (FuzzTransparency, stop 32's first): a streamable HTTP server's
// answer cut mid-way (a JSON body, an event stream with no event id to
// resume from) broke that call's own connection, not the session: the
// call is refused at once as cut off (it reached the server, so it may
// have run), never after waiting for the session's end that does not come
// and saying it ended; the session goes on and the next call is answered.
func TestCutHTTPAnswerIsNotTheSessionsEnd(t *testing.T) {
	for rev, modern := range revisions {
		g := startRig(t, modern, map[string]fault{"cut_json": cutAnswer(false), "cut_event": cutAnswer(true)})
		t.Run(rev, func(t *testing.T) {
			in := rigInstance(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, modern)
			since := in.Status().Since
			for _, tool := range []string{"cut_json", "cut_event"} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				_, _, err := in.CallRaw(ctx, tool, json.RawMessage(`{}`))
				took := time.Since(start)
				cancel()
				var cut *CutError
				var down *DownError
				if !errors.As(err, &cut) || cut.Server != "rig" || errors.As(err, &down) {
					t.Fatalf("%s answered %v (%T); want the answer cut off", tool, err, err)
				}
				// The session's end is waited for up to 2 s (waitRecorded);
				// a cut answer waits for nothing.
				if took >= 2*time.Second {
					t.Fatalf("%s was refused after %s: it waited for a session's end", tool, took)
				}
				if n := g.called(tool); n != 1 {
					t.Fatalf("%s reached the server %d times; want once", tool, n)
				}
			}
			if st := in.Status(); st.State != StateRunning || !st.Since.Equal(since) {
				t.Fatalf("after cut answers: %s since %s (was up since %s)", st.State, st.Since, since)
			}
			if text, err := callText(t, in, "echo", `{"text":"still up"}`); err != nil || text != "still up" {
				t.Fatalf("after cut answers: %q %v", text, err)
			}
		})
	}
}
