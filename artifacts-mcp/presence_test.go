package artifacts

import (
	"context"
	"testing"
	"time"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// ART-6: a seat whose call was allowed is in the artifact's room — viewing
// after a read, editing after a write, focused on what the call named —
// until its TTL passes with no further call; a refused call puts nobody
// there, and people are not shown as agents.
func TestPresence(t *testing.T) {
	h := newHarness(t, func(_ *state.Options, d *Deps) { d.PresenceTTL = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := h.create(ada, "Tracker", "{}")
	h.OK(ada, "share_artifact", map[string]any{"id": id, "to": "alan", "role": "contributor"})
	h.OK(ada, "set_artifact_schema", map[string]any{"id": id, "collections": []any{map[string]any{"name": "items", "columns": []any{map[string]any{"name": "v"}}}}})
	b, err := h.node.TTLBucket(ctx, roomsBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Watch(ctx, "room."+id+".>")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	h.Refused(turn(zed, "z", "grace"), "get_artifact", map[string]any{"id": id}, authority.NotFound)
	h.OK(alan, "get_artifact", map[string]any{"id": id})
	ev, err := w.Next(ctx)
	if err != nil || ev.Key != roomKey(id, "alan") {
		t.Fatalf("first event %+v %v", ev, err)
	}
	room, err := h.store.Room(ctx, id)
	if err != nil || len(room) != 1 || room[0].Seat != "alan" || room[0].Activity != viewing || room[0].Focus != "version 1" || room[0].Kind != "agent" {
		t.Fatalf("room %+v %v", room, err)
	}
	h.OK(alan, "write_artifact_data", map[string]any{"id": id, "ops": ops(op("set", "items", "r7", map[string]any{"v": 1}))})
	if ev, err = w.Next(ctx); err != nil || ev.Gone {
		t.Fatalf("second event %+v %v", ev, err)
	}
	room, _ = h.store.Room(ctx, id)
	if len(room) != 1 || room[0].Activity != editing || room[0].Focus != "collection items row r7" {
		t.Fatalf("room after a write %+v", room)
	}
	// People look through the dashboard; the room shows agents.
	h.OK(ada, "get_artifact", map[string]any{"id": id})
	// The seat leaves by itself once its TTL passes with no call.
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("alan never left the room: %v", err)
		}
		if ev.Gone {
			break
		}
		if ev.Key != roomKey(id, "alan") {
			t.Fatalf("somebody else entered: %+v", ev)
		}
	}
	if room, _ := h.store.Room(ctx, id); len(room) != 0 {
		t.Fatalf("room after the TTL %+v", room)
	}
}

// ART-1: list_dashboard_sources answers the sources the seat and whom its
// turn acts for may both read.
func TestDashboardSources(t *testing.T) {
	h := newHarness(t)
	all := asList(h.OK(alan, "list_dashboard_sources", map[string]any{})["sources"])
	if len(all) != 2 {
		t.Fatalf("alan for ada: %v", all)
	}
	both := asList(h.OK(turn(alan, "t", "grace"), "list_dashboard_sources", map[string]any{})["sources"])
	if len(both) != 1 || asMap(both[0])["name"] != "deploys" {
		t.Fatalf("alan for grace: %v", both)
	}
	h.Refused(turn(alan, "t", "nobody"), "list_dashboard_sources", map[string]any{}, authority.Forbidden)
}
