package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/crewlet/hub/agent-runtime"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/knowledge-mcp"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The agent runtime consumes the hub through agent.Hub: each turn is
// handed its seat's registry frozen as the turn starts (CFG-7), and every
// call goes through the hub's router as the seat, so it is decided,
// routed and sanitised exactly as any other.

// hubLink is the hub as the runtime sees it.
type hubLink struct{ h *hub.Hub }

func (l hubLink) Surface(seat string) agent.Surface {
	return surface{h: l.h, seat: seat, reg: l.h.SeatRegistry(seat).Freeze()}
}

func (l hubLink) ClaimSeat(ctx context.Context, seat string) error { return l.h.ClaimSeat(ctx, seat) }
func (l hubLink) ReleaseSeat(ctx context.Context, seat string) error {
	return l.h.ReleaseSeat(ctx, seat)
}

// surface is one turn's tools: a frozen registry and the router.
type surface struct {
	h    *hub.Hub
	seat string
	reg  hub.Registry
}

func (s surface) Tools() []agent.Tool {
	entries := s.reg.Entries()
	out := make([]agent.Tool, 0, len(entries))
	for _, e := range entries {
		out = append(out, agent.Tool{Name: e.Name, Description: e.Description, Schema: e.InputSchema, Hints: e.Hints,
			Delivers: e.Delivers, Source: string(e.Source)})
	}
	return out
}

// Down names the seat's own servers whose child is down on this node.
func (s surface) Down() []string { return s.h.SeatServersDown(s.seat) }

func (s surface) Call(ctx context.Context, caller authority.Caller, name string, args json.RawMessage) *mcp.CallToolResult {
	return s.h.Router().Call(ctx, s.reg, caller, name, args)
}

// runtimeDeps is what the runtime is built from besides the hub.
type runtimeDeps struct {
	store      *agent.Store
	node       *state.Node
	company    *config.Company // the revision the node started with: which feeds exist
	env        config.Lookup
	log        *slog.Logger
	toolSkills []agent.ToolSkill
	// fleet: the node is one of a fleet, whose leases place its seats.
	fleet bool
	// observer counts the turns and model calls (the node's metrics).
	observer agent.Observer
}

// startRuntime builds the agent runtime over a started hub. Alone, the
// runtime claims the company's agent seats itself; in a fleet the hub's
// lease loop decides which seats this node runs, and the runtime runs
// exactly those, opening and closing mailboxes as the hub tells it.
func startRuntime(ctx context.Context, h *hub.Hub, d runtimeDeps) (*agent.Runtime, error) {
	feeds := []agent.Feed{agent.A2AFeed(d.store)}
	if d.company.TrackerBackend() == "native" {
		trk := agent.FeedOf("trk",
			func(after string, limit int) ([]servers.Wake, error) { return tracker.Wakes(d.node, after, limit) },
			func(w servers.Wake) (agent.Trigger, error) { return tracker.Trigger(d.node, w) })
		trk.Ended = func(ctx context.Context, rec agent.TurnRecord) error {
			c := authority.Caller{Seat: rec.Seat, Kind: authority.KindAgent, Requester: rec.Requester, TurnKey: rec.Key}
			return tracker.NoteTurnEnded(ctx, d.node, c, rec.Woken, rec.Subject, rec.Outcome, rec.Reason)
		}
		feeds = append(feeds, trk)
	}
	if d.company.KnowledgeBackend() == "native" {
		feeds = append(feeds, agent.FeedOf("kb",
			func(after string, limit int) ([]servers.Wake, error) { return knowledge.Wakes(d.node, after, limit) },
			func(w servers.Wake) (agent.Trigger, error) { return knowledge.Trigger(d.node, w) }))
	}
	budget := agent.NewBudget(func() []agent.Ceiling {
		var out []agent.Ceiling
		for _, c := range h.Company().Budget.Ceilings() {
			out = append(out, agent.Ceiling{Scope: c.Scope, Period: c.Period, Tokens: c.Tokens})
		}
		return out
	}, nil)
	if d.fleet {
		// Every node decides against the company's whole spending: the
		// counters beside the shared log, not this node's own (issue 27).
		bucket, err := d.node.DurableTTLBucket(ctx, agent.BudgetBucket)
		if err != nil {
			return nil, fmt.Errorf("opening the fleet's budget counters: %w", err)
		}
		budget.Share(bucket, d.store)
	}
	rt, err := agent.New(agent.Options{
		Store:      d.store,
		Hub:        hubLink{h},
		Feeds:      feeds,
		Seat:       seatSpec(h, d.env),
		Auxiliary:  auxiliaryModel(h.Company, d.env),
		Directory:  h.Directory,
		Company:    func() string { return h.Company().Company.Name },
		Budget:     budget,
		Logger:     d.log.With("component", "agent"),
		ToolSkills: d.toolSkills,
		Placed:     d.fleet,
		Observer:   d.observer,
	})
	if err != nil {
		return nil, err
	}
	if err := rt.Start(ctx); err != nil {
		_ = rt.Close()
		return nil, err
	}
	if d.fleet {
		h.FollowSeats(rt.Place)
		// A steer_turn sent through another node is answered here for
		// the seats this node runs.
		if err := h.AnswerSeatQuestions(agent.SteerQuestion, rt.AnswerSteer); err != nil {
			_ = rt.Close()
			return nil, fmt.Errorf("answering the fleet's questions about seats: %w", err)
		}
		// So is an answer_run for a coding run parked here.
		if err := h.AnswerSeatQuestions(agent.RunAnswerQuestion, rt.AnswerRunQuestion); err != nil {
			_ = rt.Close()
			return nil, fmt.Errorf("answering the fleet's questions about seats: %w", err)
		}
	}
	return rt, nil
}

// seatSpec reads a seat's model and instructions from the revision in
// force, per turn: a reload is seen by the next turn.
func seatSpec(h *hub.Hub, env config.Lookup) func(string) (agent.SeatSpec, bool, error) {
	return func(seat string) (agent.SeatSpec, bool, error) {
		c := h.Company()
		spec, ok, err := c.SeatModel(seat, env)
		if err != nil || !ok {
			return agent.SeatSpec{}, ok, err
		}
		return agent.SeatSpec{
			Model: agent.ModelSpec{API: spec.API, Provider: spec.Provider, BaseURL: spec.BaseURL, APIKey: spec.APIKey,
				Model: spec.Model, MaxOutputTokens: spec.MaxOutputTokens},
			Instructions:      c.SeatInstructions(seat),
			SynthesizeSkills:  c.Learning.SynthesizeSkills,
			SummarizeEpisodes: c.Learning.SummarizeEpisodes,
		}, true, nil
	}
}
