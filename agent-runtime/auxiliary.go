package agent

import (
	"context"
	"time"

	"github.com/crewlet/hub/authority"
)

// The auxiliary model is the smaller model a seat answers questions,
// condenses and judges with (models.auxiliary, else the seat's own). A call
// on it outside any turn is the seat's all the same: it is charged to the
// seat's budget, refused before anything is sent past a ceiling, and told
// to the node's observer, whichever tool makes it.

// AuxiliaryDeps is what a call on a seat's auxiliary model needs.
type AuxiliaryDeps struct {
	// Model is the auxiliary model of a seat; ok false for none.
	Model func(seat string) (ModelSpec, bool, error)
	// Runtime is the runtime once it has started (nil before): its budget
	// is what the call is charged to, and its store keeps the spend.
	Runtime func() *Runtime
	// Timeout bounds each model call (DefaultModelTimeout if 0).
	Timeout time.Duration
}

// auxCall sends req to m, the auxiliary model spec names, as c's seat. It
// answers the reply, or a refusal (a budget ceiling) or the failed call in
// the hub's words (modelError).
func auxCall(ctx context.Context, d AuxiliaryDeps, m Model, spec ModelSpec, c authority.Caller, req Request) (Reply, error) {
	if d.Timeout <= 0 {
		d.Timeout = DefaultModelTimeout
	}
	settle := func(Usage) {}
	var rt *Runtime
	if d.Runtime != nil {
		rt = d.Runtime()
	}
	if rt != nil {
		var refusal *authority.Refusal
		if settle, refusal = rt.opts.Budget.Reserve(c.Seat, estimateRequest(req)); refusal != nil {
			return Reply{}, refusal
		}
	}
	cctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	var obs Observer = noObserver{}
	if rt != nil {
		obs = rt.opts.Observer
	}
	start := time.Now()
	rep, err := m.Complete(cctx, req)
	if err := modelCalled(obs, ctx, spec, d.Timeout, start, rep, err); err != nil {
		settle(Usage{})
		return Reply{}, err
	}
	settle(rep.Usage)
	if rt != nil && rep.Usage.Total() > 0 {
		if err := rt.opts.Store.spent(ctx, c, c.Seat, rep.Usage.Total()); err != nil {
			rt.log.Warn("spend_not_recorded", "seat", c.Seat, "tokens", rep.Usage.Total(), "error", err.Error())
		}
	}
	return rep, nil
}
