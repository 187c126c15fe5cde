package hub

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
	"github.com/crewlet/hub/tracker-mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TRK-6, OPS-3: the native tracker offers a seat eighteen tools; the
// catalogue write and a person's views, queue, inbox, pins and board drag
// are the operator surface's, twenty-seven in all, listed there.
func TestTrackerOffersSeatsEighteenToolsAndOperatorsTwentySeven(t *testing.T) {
	node, err := state.Open(context.Background(), state.Options{Dir: filepath.Join(t.TempDir(), "state"), Projectors: tracker.Projectors()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c := hubtest.NewCompany().Person("ada", true).Agent("bot").Token("laptop", "ADA_TOKEN", "ada").Parse(t)
	h, err := New(context.Background(), Options{Company: c,
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup,
		FirstParty: []FirstParty{{Name: "tracker", New: func(tr servers.Trust, d Deps) *mcp.Server {
			return tracker.NewServer(tracker.Deps{Node: node, Directory: d.Directory, Logger: d.Logger}, tr)
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	names := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	seat, operator := names(h.SeatRegistry("bot").Entries()), names(CompanyRegistry(h.Catalogue()).Entries())
	if len(seat) != 18 || slices.Contains(seat, "write_work_catalogue") {
		t.Errorf("a seat is offered %d tools: %v", len(seat), seat)
	}
	if len(operator) != 27 || !slices.Contains(operator, "write_work_catalogue") {
		t.Errorf("the operator is offered %d tools: %v", len(operator), operator)
	}
	cs := hubtest.Connect(t, hubtest.Serve(t, h.Handler())+"/operator/mcp", "ada-token-123456", "")
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 27 {
		t.Fatalf("/operator/mcp lists %d tools (%v)", len(lt.Tools), err)
	}
}

// REF-5: a seat calling an operator-only tool is refused forbidden before
// the tool runs; the operator's call runs it.
func TestOperatorOnlyToolRefusedToSeatsBeforeItRuns(t *testing.T) {
	var ran atomic.Int32
	adminEcho := servers.Typed("admin_echo", "Echo, for people only.", servers.Hints{ReadOnly: servers.Yes}, "",
		func(ctx context.Context, c authority.Caller, in echoIn) (echoOut, error) {
			ran.Add(1)
			return echoOut{Text: in.Text, Seat: c.Seat}, nil
		}).ForOperators()
	c := hubtest.NewCompany().Person("ada", true).Agent("bot").Token("laptop", "ADA_TOKEN", "ada").Parse(t)
	h, err := New(context.Background(), Options{Company: c,
		Env: hubtest.NewEnv(map[string]string{"ADA_TOKEN": "ada-token-123456"}).Lookup,
		FirstParty: []FirstParty{{Name: "kit", New: func(tr servers.Trust, _ Deps) *mcp.Server {
			s := mcp.NewServer(&mcp.Implementation{Name: "kit", Version: "0"}, nil)
			servers.Register(s, tr, nil, echoTool(), adminEcho)
			return s
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if e, ok := h.Catalogue().Get("admin_echo"); !ok || !e.OperatorOnly {
		t.Fatalf("catalogue entry %+v: not recorded operator-only", e)
	}
	bot := authority.Caller{Seat: "bot", Kind: authority.KindAgent, Requester: "ada", TurnKey: "t1"}
	res := h.Router().Call(context.Background(), h.SeatRegistry("bot"), bot, "admin_echo", []byte(`{"text":"x"}`))
	if class, _ := servers.ClassOf(res); class != authority.Forbidden || ran.Load() != 0 {
		t.Fatalf("seat's call: class %q, ran %d times", class, ran.Load())
	}
	cs := hubtest.Connect(t, hubtest.Serve(t, h.Handler())+"/operator/mcp", "ada-token-123456", "")
	out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "admin_echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || out.IsError || ran.Load() != 1 {
		t.Fatalf("operator's call: %v %v, ran %d", err, hubtest.Text(out), ran.Load())
	}
}
