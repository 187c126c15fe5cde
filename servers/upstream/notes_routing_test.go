//lint:file-ignore SA1019 the tests play clients and servers of the session revisions, which still send and take logging and sampling.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const strayLine = "late line of ADMIN-SECRET-PROJECT"

// Issue 36 finding 3: a shared server's log line that names no request
// (it came on no call's own stream and carries no progress token the hub
// gave) reaches no caller, though one caller's call is the only one in
// flight when it comes: it is in the hub's log as server_note_unrouted,
// with its server and level and without its text. Over stdio on both
// revisions, and over streamable HTTP on a session revision (2026-07-28
// has no stream of the session's own, so a line there always comes on a
// call's stream).
func TestStrayNoteReachesNoCaller(t *testing.T) {
	check := func(t *testing.T, logs *logBuf, admin, bob *logSink) {
		t.Helper()
		for who, sink := range map[string]*logSink{"admin": admin, "bob": bob} {
			sink.mu.Lock()
			got := sink.lines
			sink.mu.Unlock()
			if len(got) > 0 {
				t.Fatalf("%s's client was shown %q", who, got)
			}
		}
		ev := logs.events("server_note_unrouted")
		if len(ev) != 1 || ev[0]["level"] != "info" || ev[0]["server"] == nil || ev[0]["method"] != "notifications/message" {
			t.Fatalf("the hub's log has %v; want one server_note_unrouted naming the server and the level", ev)
		}
		logs.mu.Lock()
		defer logs.mu.Unlock()
		if strings.Contains(logs.buf.String(), "ADMIN-SECRET") {
			t.Fatal("the hub's log holds the line's text")
		}
	}
	for rev, modern := range revisions {
		t.Run("stdio/"+rev, func(t *testing.T) {
			env := map[string]string{"UPSTREAM_RIG_TOOLS": "1"}
			if modern {
				env["UPSTREAM_MODERN"] = "1"
			}
			in, logs := startTest(t, testSpec(t, "go-sdk", env), func(o *Options) { o.Schedule = &Schedule{Base: time.Hour, Jitter: -1} })
			waitState(t, in, StateRunning, 10*time.Second)
			admin, bob := &logSink{scripted: scripted{caller: "admin"}}, &logSink{scripted: scripted{caller: "bob"}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, _, err := in.CallRaw(WithDownstream(ctx, admin), "echo", json.RawMessage(`{"text":"admin's call"}`)); err != nil {
				t.Fatal(err)
			}
			// The line comes before bob's answer, on the one pipe: bob's
			// call is the only one in flight when the hub reads it.
			if _, _, err := in.CallRaw(WithDownstream(ctx, bob), "stray_note", json.RawMessage(`{"text":"`+strayLine+`"}`)); err != nil {
				t.Fatal(err)
			}
			check(t, logs, admin, bob)
		})
	}
	t.Run("http/2025-11-25", func(t *testing.T) {
		g := startRig(t, false, nil)
		in, logs := startTest(t, Resolved{Name: "rig", Transport: TransportHTTP, URL: g.url}, func(o *Options) { o.Schedule = &Schedule{Base: time.Hour, Jitter: -1} })
		waitState(t, in, StateRunning, 10*time.Second)
		admin, bob := &logSink{scripted: scripted{caller: "admin"}}, &logSink{scripted: scripted{caller: "bob"}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, _, err := in.CallRaw(WithDownstream(ctx, admin), "echo", json.RawMessage(`{"text":"admin's call"}`)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := in.CallRaw(WithDownstream(ctx, bob), "stray_note_held", json.RawMessage(`{"text":"`+strayLine+`"}`))
			done <- err
		}()
		// Bob's call is held in flight until the line has gone somewhere:
		// to the hub's log, or to a client.
		for len(logs.events("server_note_unrouted")) == 0 {
			bob.mu.Lock()
			shown := len(bob.lines)
			bob.mu.Unlock()
			if shown > 0 || ctx.Err() != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		check(t, logs, admin, bob)
	})
}

// Issue 36 finding 3: a log line that names its call by the call's
// progress token reaches that call's client alone, over stdio, where no
// stream says whose it is, while another caller's call is in flight too.
func TestTokenNoteReachesItsCaller(t *testing.T) {
	in := rigInstance(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_RIG_TOOLS": "1"}), false)
	admin, bob := &logSink{scripted: scripted{token: "admin-1", caller: "admin"}}, &logSink{scripted: scripted{token: "bob-1", caller: "bob"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adminCtx, stopAdmin := context.WithCancel(ctx)
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _, _ = in.CallRaw(WithDownstream(adminCtx, admin), "until_cancelled", json.RawMessage(`{}`))
	}()
	for {
		in.flights.mu.Lock()
		n := len(in.flights.list)
		in.flights.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, _, err := in.CallRaw(WithDownstream(ctx, bob), "token_note", json.RawMessage(`{"text":"bob's own line"}`))
	stopAdmin()
	<-held
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(bob.lines, ","); got != "bob's own line" {
		t.Fatalf("bob's client was shown %q; want his own line", got)
	}
	if len(admin.lines) > 0 {
		t.Fatalf("admin's client was shown %q", admin.lines)
	}
}

// Issue 36 finding 3: a server's sampling request over stdio that names
// no call is refused to the server with a JSON-RPC error once the server
// has served two callers, though one call is in flight: its client is not
// asked. Named by the call's progress token, it reaches that call's
// client.
func TestStraySamplingRefused(t *testing.T) {
	in := rigInstance(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_RIG_TOOLS": "1"}), false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := in.CallRaw(WithDownstream(ctx, &scripted{caller: "admin"}), "echo", json.RawMessage(`{"text":"admin's call"}`)); err != nil {
		t.Fatal(err)
	}
	asked := false
	bob := &scripted{caller: "bob", sample: func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		asked = true
		return nil, errors.New("bob was asked")
	}}
	raw, _, err := in.CallRaw(WithDownstream(ctx, bob), "ask_sampling", json.RawMessage(`{}`))
	if err != nil || asked || !strings.Contains(string(raw), "sampling failed") || !strings.Contains(string(raw), "names no call") {
		t.Fatalf("a sampling request naming no call: %s, %v (client asked: %v); want it refused to the server", raw, err, asked)
	}
	named := &scripted{caller: "bob", token: "bob-2", sample: sampled("mine")}
	raw, _, err = in.CallRaw(WithDownstream(ctx, named), "ask_sampling", json.RawMessage(`{}`))
	if err != nil || !strings.Contains(string(raw), "sampled: mine") {
		t.Fatalf("a sampling request naming its call: %s, %v", raw, err)
	}
}

// Issue 36 finding 3: over stdio, where nothing on the wire says whose a
// request is, a server that has served one caller alone hands a request
// naming no call to that caller's one call in flight, as a client talking
// to the server directly would be asked: a stdio server's sampling works
// through the hub for the caller using it, and no other caller's message
// can be among what it sends.
func TestOneCallersSamplingReachesIt(t *testing.T) {
	in := rigInstance(t, testSpec(t, "go-sdk", map[string]string{"UPSTREAM_RIG_TOOLS": "1"}), false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 2 {
		raw, _, err := in.CallRaw(WithDownstream(ctx, &scripted{caller: "admin", sample: sampled("mine")}), "ask_sampling", json.RawMessage(`{}`))
		if err != nil || !strings.Contains(string(raw), "sampled: mine") {
			t.Fatalf("call %d: a sampling request of the one caller's call: %s, %v", i, raw, err)
		}
	}
}
