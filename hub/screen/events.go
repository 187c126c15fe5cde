package screen

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// How the event stream paces itself.
const (
	// settle gathers a burst of changes (a server's start files its tools
	// and changes its state in one breath) into one event.
	settle = 150 * time.Millisecond
	// keepAlive is how often an idle stream says it is there, and asks
	// whether its session's token is still current.
	keepAlive = 15 * time.Second
)

// serveEvents is a page's live stream (server-sent events): a change
// event each time a server changes state or a catalogue moves, after
// which the page fetches its live region again. It ends with a signed-out
// event when the session's token stops being current, and when the hub
// closes.
func (s *Screen) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	send := func(event, data string) bool {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	current := func() bool {
		id, _ := sessionOf(r)
		_, ok := s.current(r.Context(), id)
		return ok
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	var settling <-chan time.Time
	ver, changed := s.opts.Backend.Changes()
	if ver != since {
		// Something changed between the page being drawn and its stream
		// opening: say so at once.
		settling = time.After(0)
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.opts.Done:
			return
		case <-changed:
			_, changed = s.opts.Backend.Changes()
			if settling == nil {
				settling = time.After(settle)
			}
		case <-settling:
			settling = nil
			if !current() {
				if r.Context().Err() != nil {
					return // the page went away while its session was read
				}
				s.opts.Refused(r, "session token unknown or revoked")
				send("signed-out", "")
				return
			}
			ver, changed = s.opts.Backend.Changes()
			if !send("change", strconv.FormatUint(ver, 10)) {
				return
			}
		case <-tick.C:
			if !current() {
				send("signed-out", "")
				return
			}
			if _, err := fmt.Fprint(w, ": still here\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
