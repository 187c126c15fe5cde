package servers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// keyed is person sending a request under an Idempotency-Key.
func keyed(c authority.Caller, key string) authority.Caller {
	c.Operation = key
	return c
}

// OPS-6: a key names one operation of the credential that sent it: the
// same request again lands once and answers the same; the same key from
// another credential is another operation; the same key with other
// arguments or another tool is refused before anything is written.
func TestKeyNamesOneOperation(t *testing.T) {
	w, node, f := openWrites(t)
	ctx := context.Background()
	write := func(c authority.Caller, tool, key string) (servers.WriteOut, *countResult, error) {
		call, err := w.Begin(c, tool, &noteIn{Key: key}, false)
		if err != nil {
			return servers.WriteOut{}, nil, err
		}
		return servers.Write[countResult](ctx, w, call, count(key))
	}
	first, res, err := write(keyed(person, "req-1"), "write_note", "k")
	if err != nil || first.Outcome != state.Applied || res.Count != 1 || first.OpID == "" {
		t.Fatalf("first: %+v %+v %v", first, res, err)
	}
	again, res, err := write(keyed(person, "req-1"), "write_note", "k")
	if err != nil || again != first || res.Count != 1 {
		t.Fatalf("the same request again: %+v %+v %v, want %+v and count 1", again, res, err, first)
	}
	// A restarted server (a fresh Writes, its clock an hour on) still
	// mints the key's operation at the instant the key first wrote.
	fresh := servers.NewWrites(node, servers.WritesOptions{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	call, _ := fresh.Begin(keyed(person, "req-1"), "write_note", &noteIn{Key: "k"}, false)
	if string(call.ID) != first.OpID {
		t.Fatalf("after a restart the key names %s, not %s", call.ID, first.OpID)
	}
	phone := person
	phone.OperatorID = "phone"
	other, res, err := write(keyed(phone, "req-1"), "write_note", "k")
	if err != nil || other.OpID == first.OpID || res.Count != 2 {
		t.Fatalf("the same key from another credential: %+v %+v %v", other, res, err)
	}
	appends := f.Appends()
	for _, tc := range []struct{ tool, key string }{{"write_note", "else"}, {"erase_note", "k"}} {
		_, _, err := write(keyed(person, "req-1"), tc.tool, tc.key)
		r := refusal(t, err, authority.Invalid)
		if !strings.Contains(r.Sentence, `"req-1" already names another request`) || r.Data["idempotency_key"] != "req-1" {
			t.Errorf("%s %s under a used key: %q %v", tc.tool, tc.key, r.Sentence, r.Data)
		}
	}
	if f.Appends() != appends {
		t.Fatalf("%d appends for requests refused before writing", f.Appends()-appends)
	}
	in := &noteIn{Key: "k", OpIDArg: servers.OpIDArg{OpID: first.OpID}}
	refusal(t, ignore(w.Begin(keyed(person, "req-1"), "write_note", in, false)), authority.Invalid)
	refusal(t, ignore(w.Begin(keyed(seat, "req-1"), "write_note", &noteIn{Key: "k"}, false)), authority.Forbidden)
}

// A key whose request wrote nothing (refused before any write) names
// nothing yet: the corrected request under it goes ahead.
func TestKeyOfARequestThatWroteNothingIsFree(t *testing.T) {
	w, _, _ := openWrites(t)
	ctx := context.Background()
	bad, _ := w.Begin(keyed(person, "req-2"), "write_note", &noteIn{Key: "bad"}, false)
	_, _, err := servers.Write[countResult](ctx, w, bad, func(pebble.Reader) (servers.Intent, error) {
		return servers.Intent{}, authority.Refuse(authority.Invalid, "bad is no key")
	})
	refusal(t, err, authority.Invalid)
	good, _ := w.Begin(keyed(person, "req-2"), "write_note", &noteIn{Key: "good"}, false)
	if out, _, err := servers.Write[countResult](ctx, w, good, count("good")); err != nil || out.Outcome != state.Applied {
		t.Fatalf("the corrected request: %+v %v", out, err)
	}
}

// OPS-6: while a key's request is being written on this node, the same key
// with another request is refused; the same request again is not.
func TestKeyInFlightRefusesAnotherRequest(t *testing.T) {
	w, _, _ := openWrites(t)
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	first, _ := w.Begin(keyed(person, "req-3"), "write_note", &noteIn{Key: "k"}, false)
	go func() {
		_, _, err := servers.Write[countResult](ctx, w, first, func(r pebble.Reader) (servers.Intent, error) {
			close(entered)
			<-release
			return count("k")(r)
		})
		done <- err
	}()
	<-entered
	other, _ := w.Begin(keyed(person, "req-3"), "write_note", &noteIn{Key: "other"}, false)
	_, _, err := servers.Write[countResult](ctx, w, other, count("other"))
	refusal(t, err, authority.Invalid)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	same, _ := w.Begin(keyed(person, "req-3"), "write_note", &noteIn{Key: "k"}, false)
	if _, res, err := servers.Write[countResult](ctx, w, same, count("k")); err != nil || res.Count != 1 {
		t.Fatalf("the same request after it landed: %+v %v", res, err)
	}
}

// WR-2: a keyed write whose outcome is unknown says to send the request
// again under the same key, naming the operation.
func TestKeyedUnknownOutcome(t *testing.T) {
	w, _, f := openWrites(t)
	f.Set(func(f *statetest.Faults) { f.DropAcks = 1 })
	call, _ := w.Begin(keyed(person, "req-4"), "write_note", &noteIn{Key: "k"}, false)
	_, _, err := servers.Write[countResult](context.Background(), w, call, count("k"))
	r := refusal(t, err, authority.Unavailable)
	if !strings.Contains(r.Sentence, "same Idempotency-Key") || !strings.Contains(r.Sentence, string(call.ID)) || r.Data["outcome"] != "unknown" {
		t.Fatalf("%q %v", r.Sentence, r.Data)
	}
	again, _ := w.Begin(keyed(person, "req-4"), "write_note", &noteIn{Key: "k"}, false)
	if out, res, err := servers.Write[countResult](context.Background(), w, again, count("k")); err != nil || res.Count != 1 || out.OpID != string(call.ID) {
		t.Fatalf("the same request again: %+v %+v %v", out, res, err)
	}
}
