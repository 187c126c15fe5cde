package servers_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/servers/state/statetest"
)

// TRK-4: wake rows come back in log order, a page at a time by cursor,
// with who asked and about what; a cursor is the server's, never a key.
func TestWakesFeed(t *testing.T) {
	waker := servers.Projector("test.wake", func(a *servers.Apply) (any, error) {
		var seats []string
		if err := a.Payload(&seats); err != nil {
			return nil, err
		}
		for i, s := range seats {
			if err := a.Wake("t/wake/", s, "SUBJ-1", i+1); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	node, _ := statetest.OpenFaulty(t, t.TempDir(), state.Options{Projectors: []state.Projector{waker}})
	for i, seats := range [][]string{{"ada", "alan"}, {"grace"}} {
		payload, _ := json.Marshal(seats)
		if _, err := node.Write(context.Background(), state.Op{Tool: "t", Args: json.RawMessage([]byte{'1' + byte(i)}), Kind: "test.wake", Payload: payload,
			Caller: authority.Caller{Seat: "bob", Kind: authority.KindHuman}}); err != nil {
			t.Fatal(err)
		}
	}
	// A page holds what was asked for, and a limit of 0 asks for the
	// default page (every row here).
	if page, err := servers.Wakes(node, "t/wake/", "", 2); err != nil || len(page) != 2 {
		t.Fatalf("a page of 2: %d rows, %v", len(page), err)
	}
	if page, err := servers.Wakes(node, "t/wake/", "", 0); err != nil || len(page) != 3 {
		t.Fatalf("the default page: %d rows, %v", len(page), err)
	}
	var got []string
	after := ""
	for {
		page, err := servers.Wakes(node, "t/wake/", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, w := range page {
			if w.By != "bob" || w.Subject != "SUBJ-1" || w.Cursor == "" {
				t.Fatalf("wake %+v", w)
			}
			got = append(got, w.Seat)
		}
		after = page[len(page)-1].Cursor
	}
	if len(got) != 3 || got[0] != "ada" || got[1] != "alan" || got[2] != "grace" {
		t.Fatalf("wakes in order %v", got)
	}
	if _, err := servers.Wakes(node, "t/wake/", "bad\x00cursor", 10); authority.AsRefusal(err).Class != authority.Invalid {
		t.Fatalf("a NUL cursor: %v", err)
	}
}

// The rows one operation adds to a feed are numbered from 1 (the ".0001"
// readers see at the end of an activity id), one more each time.
func TestSeqNumbersFromOne(t *testing.T) {
	var a servers.Apply
	for want := 1; want <= 3; want++ {
		if got := a.Seq(); got != want {
			t.Fatalf("row %d numbered %d", want, got)
		}
	}
}
