package hub

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers/state"
)

// A node of a fleet (FLT-1, FLT-2). Its one goroutine, owned by the Hub
// and ended by Close, does three things every heartbeat and whenever a
// lease changes:
//
//   - publishes this node's heartbeat;
//   - follows its leases: a seat whose proof ran out has its children
//     stopped at once (the node must not act for a seat it cannot prove),
//     and started again if a renewal proves the lease again; a seat whose
//     lease was lost is let go;
//   - places seats: a free
//     agent seat is claimed by the live node that hashes first for it
//     (rendezvous hashing, so the nodes agree without talking), or by any
//     node once it has stayed free for two heartbeats. A held seat stays
//     where it is until its node lets it go or dies: moving a seat
//     restarts its children, which a fleet should not do for balance
//     alone. A seat whose holder has stopped heartbeating is asked about
//     in the lease bucket itself every heartbeat, so it is seen free
//     within a heartbeat of its lease lapsing even while the watch of the
//     leases is behind.
//
// A node waits one and a half heartbeats after it starts before it places
// anything, so it has heard its peers first. After each pass, whoever
// follows the node's seats (FollowSeats: the agent runtime, which opens a
// mailbox only for a seat named) is told the seats it acts for, when they
// changed.

// fleetRun is a hub's part in its fleet.
type fleetRun struct {
	f     *Fleet
	peers *peerTable
	unsub func()
	ctx   context.Context // the loop's, ended by stopFleet
	stop  context.CancelFunc
	wg    conc.WaitGroup
	// freeSince is when each free seat was first seen free; the loop's
	// own.
	freeSince map[string]time.Time
	// follow is told the seats this node acts for (FollowSeats); poke
	// has the loop tell a follower just set.
	follow atomic.Pointer[func(seats []string)]
	poke   chan struct{}
	// told and toldTo are what the loop last told, and whom; the loop's
	// own.
	told   []string
	toldTo *func(seats []string)
	// answering stops the answers to seat questions (fleet_ask.go).
	askMu     sync.Mutex
	answering []func()
	// ready are the held seats whose children have had their first start
	// (or StartupWait passed): only these are told to the follower, so a
	// seat's mailbox opens with its tools (FLT-4). waiting are the seats
	// a goroutine waits on to wake the loop when they are. The loop's own.
	ready, waiting map[string]bool
}

// FollowSeats has fn told, from the fleet's loop, the seats this node
// acts for (sorted) each time they change: a seat claimed or placed here,
// one whose lease was lost or let go, one whose proof ran out or came
// back; and once at once with the seats as they are. fn must not block,
// nor call back into the hub's seat API on the loop's goroutine. It
// reports false for a node alone, where the seats do not move and fn is
// never told anything.
func (h *Hub) FollowSeats(fn func(seats []string)) bool {
	if h.fleet == nil {
		return false
	}
	h.fleet.follow.Store(&fn)
	select {
	case h.fleet.poke <- struct{}{}:
	default:
	}
	return true
}

// tellSeats tells the follower the seats this node acts for, if they
// changed since it was last told.
func (h *Hub) tellSeats() {
	run := h.fleet
	fn := run.follow.Load()
	if fn == nil {
		return
	}
	seats := h.readySeats()
	if fn == run.toldTo && slices.Equal(seats, run.told) {
		return
	}
	run.told, run.toldTo = seats, fn
	(*fn)(slices.Clone(seats))
}

// readySeats are the seats this node acts for whose children have had
// their first start, or StartupWait since the claim: a child that fails
// is down, not starting, and one held back for a credential is not waited
// for. A seat once ready stays so while it is held (a child restarting
// later does not close its mailbox). For each seat still starting a
// goroutine waits, and wakes the loop when it is done.
func (h *Hub) readySeats() []string {
	run := h.fleet
	held := h.HeldSeats()
	for _, m := range []map[string]bool{run.ready, run.waiting} {
		for seat := range m {
			if !slices.Contains(held, seat) {
				delete(m, seat)
			}
		}
	}
	out := make([]string, 0, len(held))
	for _, seat := range held {
		if !run.ready[seat] && h.servers.seatStarting(seat) && time.Since(h.seats.claimedAt(seat)) < h.opts.StartupWait {
			if !run.waiting[seat] {
				run.waiting[seat] = true
				wait := h.opts.StartupWait - time.Since(h.seats.claimedAt(seat))
				run.wg.Go(func() {
					ctx, cancel := context.WithTimeout(run.ctx, wait)
					defer cancel()
					h.servers.awaitSeatStarted(ctx, seat)
					h.pokeFleet()
				})
			}
			continue
		}
		run.ready[seat] = true
		delete(run.waiting, seat)
		out = append(out, seat)
	}
	return out
}

// pokeFleet has the fleet's loop run a pass now; nothing alone.
func (h *Hub) pokeFleet() {
	if h.fleet == nil {
		return
	}
	select {
	case h.fleet.poke <- struct{}{}:
	default:
	}
}

// startFleet subscribes to the fleet's heartbeats and starts the loop.
func (h *Hub) startFleet() error {
	f := h.opts.Fleet
	run := &fleetRun{f: f, peers: newPeerTable(f.Node), freeSince: map[string]time.Time{}, poke: make(chan struct{}, 1),
		ready: map[string]bool{}, waiting: map[string]bool{}}
	unsub, err := f.Bus.Subscribe(beatSubject+"*", func(data []byte) { run.peers.record(data, time.Now()) })
	if err != nil {
		return err
	}
	run.unsub = unsub
	ctx, stop := context.WithCancel(context.Background())
	run.ctx, run.stop = ctx, stop
	h.fleet = run
	run.wg.Go(func() { h.fleetLoop(ctx) })
	return nil
}

// stopFleet ends the loop and the subscription; safe when there is none.
func (h *Hub) stopFleet() {
	if h.fleet == nil {
		return
	}
	h.fleet.stop()
	if r := h.fleet.wg.WaitAndRecover(); r != nil {
		h.log.Error("fleet_loop_panicked", "panic", r.String())
	}
	h.fleet.unsub()
	h.fleet.askMu.Lock()
	for _, stop := range h.fleet.answering {
		stop()
	}
	h.fleet.answering = nil
	h.fleet.askMu.Unlock()
}

func (h *Hub) fleetLoop(ctx context.Context) {
	f := h.fleet.f
	beat := time.NewTicker(f.Heartbeat)
	defer beat.Stop()
	settle := time.NewTimer(f.Heartbeat * 3 / 2)
	defer settle.Stop()
	settled := false
	h.publishBeat()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			h.publishBeat()
			h.fleet.peers.forget(time.Now())
		case <-f.Leases.Changed():
		case <-h.fleet.poke:
		case <-settle.C:
			settled = true
		}
		h.followLeases()
		if settled && !f.ManualSeats {
			h.placeSeats(ctx)
		}
		h.tellSeats()
	}
}

// publishBeat sends this node's heartbeat: each server's cell as GET
// /mcp-servers would show it here, reasons bounded, and the seats it acts
// for.
func (h *Hub) publishBeat() {
	f := h.fleet.f
	b := heartbeat{Node: f.Node, IntervalMs: f.Heartbeat.Milliseconds(), Seats: h.HeldSeats()}
	if b.Seats == nil {
		b.Seats = []string{}
	}
	for _, row := range h.status.rows(h.Company(), func(config.MCPServer) launch { return launch{} }) {
		b.Servers = append(b.Servers, beatServer{Name: row.Name, nodeCell: beatCell(row.Nodes[0])})
	}
	data, err := json.Marshal(b)
	if err == nil {
		err = f.Bus.Publish(beatSubject+f.Node, data)
	}
	if err != nil {
		h.log.Warn("fleet_heartbeat_failed", "error", err.Error())
	}
}

// followLeases lets go of the seats whose leases were lost, and
// reconciles those whose proof ran out or came back.
func (h *Hub) followLeases() {
	leases := h.fleet.f.Leases
	for _, seat := range h.seats.claimedSeats() {
		if !leases.Has(seat) {
			h.log.Warn("seat_lost", "seat", seat, "node", h.fleet.f.Node, "reason", "its lease lapsed or another node holds it")
			h.stopActing(seat, "its lease was lost")
		}
	}
	for _, seat := range h.seats.flipped() {
		h.applyMu.Lock()
		h.servers.reconcileSeat(h.Company(), seat)
		h.applyMu.Unlock()
		if h.seats.acting(seat) {
			h.log.Info("seat_acting", "seat", seat, "node", h.fleet.f.Node, "reason", "its lease is proved again")
		} else {
			h.log.Warn("seat_not_acting", "seat", seat, "node", h.fleet.f.Node, "reason", "this node cannot prove its lease; its children are stopped until it can")
		}
	}
}

// placeSeats claims the free agent seats this node is the choice for, and
// lets go of claimed seats the company no longer runs as agents.
func (h *Hub) placeSeats(ctx context.Context) {
	run := h.fleet
	now := time.Now()
	live := run.peers.liveNodes(now)
	holders := run.f.Leases.Holders()
	agents := map[string]bool{}
	for _, s := range h.Directory().Seats() {
		if s.Kind == authority.SeatAgent {
			agents[s.Handle] = true
		}
	}
	mine := map[string]bool{}
	for _, seat := range h.seats.claimedSeats() {
		mine[seat] = true
		if !agents[seat] {
			rctx, cancel := context.WithTimeout(ctx, run.f.Heartbeat)
			_ = h.ReleaseSeat(rctx, seat)
			cancel()
		}
	}
	seats := make([]string, 0, len(agents))
	for seat := range agents {
		seats = append(seats, seat)
	}
	slices.Sort(seats)
	for seat := range run.freeSince {
		if !agents[seat] {
			delete(run.freeSince, seat)
		}
	}
	for _, seat := range seats {
		if ctx.Err() != nil {
			return
		}
		if node := holders[seat]; node != "" && !mine[seat] && !slices.Contains(live, node) {
			// Held by a node that has stopped heartbeating: its lease is
			// about to lapse, and what the watch says may be behind (its
			// consumer may have lived on that node). Ask the bucket.
			cctx, cancel := context.WithTimeout(ctx, run.f.Heartbeat)
			if holder, err := run.f.Leases.Holder(cctx, seat); err == nil {
				holders[seat] = holder
			} else {
				h.log.Warn("seat_holder_unknown", "seat", seat, "holder", node, "error", err.Error(),
					"reason", "its holder has stopped heartbeating and the lease bucket did not answer; asked again next heartbeat")
			}
			cancel()
		}
		if mine[seat] || holders[seat] != "" {
			delete(run.freeSince, seat)
			continue
		}
		since, seen := run.freeSince[seat]
		if !seen {
			since = now
			run.freeSince[seat] = now
		}
		if preferred(seat, live) != run.f.Node && now.Sub(since) < 2*run.f.Heartbeat {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, run.f.Heartbeat)
		err := run.f.Leases.Claim(cctx, seat)
		cancel()
		if err != nil {
			// Held: a claim racing another node's, or a replica that has
			// not seen the lapse yet; anything else is worth a line.
			level := slog.LevelWarn
			if errors.Is(err, state.ErrSeatHeld) {
				level = slog.LevelDebug
			}
			h.log.Log(ctx, level, "seat_claim_failed", "seat", seat, "error", err.Error())
			continue
		}
		delete(run.freeSince, seat)
		h.actFor(seat)
	}
}

// preferred is the node a seat goes to among nodes: the highest hash of
// node and seat, so every node computes the same choice and a node
// leaving moves only its own seats.
func preferred(seat string, nodes []string) string {
	best, bestScore := "", uint64(0)
	for _, n := range nodes {
		hash := fnv.New64a()
		_, _ = hash.Write([]byte(n))
		_, _ = hash.Write([]byte{0})
		_, _ = hash.Write([]byte(seat))
		if s := hash.Sum64(); best == "" || s > bestScore {
			best, bestScore = n, s
		}
	}
	return best
}

// fleetRows adds every other node's cell to this node's rows.
func (h *Hub) fleetRows(rows []serverRow) []serverRow {
	if h.fleet == nil {
		return rows
	}
	now := time.Now()
	for i := range rows {
		cells := append(rows[i].Nodes, h.fleet.peers.cells(rows[i].Name, now)...)
		sort.Slice(cells, func(a, b int) bool { return cells[a].Node < cells[b].Node })
		rows[i].Nodes = cells
		rows[i].State, rows[i].Reason = rollUp(cells)
	}
	return rows
}

// fleetView is GET /fleet: this node, every node heard from, and who holds
// which seat.
type fleetView struct {
	Node        string            `json:"node"`
	HeartbeatMs int64             `json:"heartbeat_ms,omitempty"`
	Nodes       []fleetNodeView   `json:"nodes"`
	Holders     map[string]string `json:"holders"`
	// Streams are the fleet's replicated streams as their leaders see
	// them, when the node can tell.
	Streams []state.StreamHealth `json:"streams,omitempty"`
}

func (h *Hub) fleetView(ctx context.Context) fleetView {
	self := fleetNodeView{Node: h.nodeName(), Live: true, Self: true, Seats: h.HeldSeats()}
	if self.Seats == nil {
		self.Seats = []string{}
	}
	v := fleetView{Node: self.Node, Holders: map[string]string{}}
	if h.fleet == nil {
		for _, seat := range self.Seats {
			v.Holders[seat] = self.Node
		}
		v.Nodes = []fleetNodeView{self}
		return v
	}
	v.HeartbeatMs = h.fleet.f.Heartbeat.Milliseconds()
	v.Holders = h.fleet.f.Leases.Holders()
	v.Nodes = append(h.fleet.peers.nodes(time.Now()), self)
	sort.Slice(v.Nodes, func(a, b int) bool { return v.Nodes[a].Node < v.Nodes[b].Node })
	if health := h.fleet.f.Health; health != nil {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v.Streams = health(hctx)
		cancel()
	}
	return v
}

func (f *operator) serveFleet(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, f.control.fleetView(r.Context()))
}
