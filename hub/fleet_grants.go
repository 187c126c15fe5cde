package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crewlet/hub/hub/grants"
	"github.com/crewlet/hub/servers/seal"
	"github.com/crewlet/hub/servers/state"
)

// Seats' upstream OAuth grants in a fleet (issue 39, build 2). A grant is
// the fleet's, not a node's: sealed in the fleet's grants bucket, so the
// seat's next holder (after a move, or kill -9 of the last) starts its
// child with it. An authorization begun through one node is answered by
// whichever node the balancer sends the person back to: the authorization
// under way is kept, sealed, in a bucket every node reads. And a grant
// that arrives, or is refused, on one node is told to the others over the
// fleet's bus, so the node running the seat starts (or holds back) its
// child at once, and every node's page says where the grant stands.

// grantsBucket holds a fleet's grants, sealed under its oauth_grants key.
const grantsBucket = "CREWLET_OAUTH_GRANTS"

// fleetGrants makes the fleet's grants bucket the grant store of a node
// of a fleet (issue 39, build 2): a seat that moves to another node,
// even off one killed, finds its grant there, where a node's own store
// held it only for the node that made it. A node alone keeps its own.
func (h *Hub) fleetGrants(ctx context.Context) error {
	f := h.opts.Fleet
	if f == nil || f.Keys == nil || f.Buckets == nil {
		return nil
	}
	key, err := f.Keys.Key(ctx, keyOAuthGrants)
	if err != nil {
		return fmt.Errorf("hub: the fleet's key for OAuth grants: %w", err)
	}
	vault, err := f.Buckets.OpenSealedValues(ctx, grantsBucket, key)
	if err != nil {
		return fmt.Errorf("hub: the fleet's OAuth grants: %w", err)
	}
	if h.grantPending, err = newFleetPending(ctx, f, key); err != nil {
		return fmt.Errorf("hub: the fleet's OAuth authorizations under way: %w", err)
	}
	h.opts.Grants = vault
	return nil
}

// grantsPendingBucket holds the authorizations under way, each for as long
// as it may take.
const grantsPendingBucket = "CREWLET_OAUTH_PENDING"

// fleetPending is the fleet's grants.PendingStore: a TTL bucket whose
// values (a PKCE verifier, a client's secret) are sealed under the
// fleet's grants key, bound to their state.
type fleetPending struct {
	b   *state.TTLBucket
	box *seal.Box
}

func newFleetPending(ctx context.Context, f *Fleet, key []byte) (*fleetPending, error) {
	b, err := f.Buckets.TTLBucket(ctx, grantsPendingBucket)
	if err != nil {
		return nil, err
	}
	box, err := seal.New(key)
	if err != nil {
		return nil, err
	}
	return &fleetPending{b: b, box: box}, nil
}

func pendingBinding(state string) []byte { return []byte("crewlet oauth pending\x00" + state) }

// pendingWait bounds each read and write of a pending authorization: the
// screen's request carries no deadline, and a bucket electing a leader
// would hold a person's callback with it for good.
const pendingWait = 5 * time.Second

func (p *fleetPending) Put(ctx context.Context, st string, value []byte, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, pendingWait)
	defer cancel()
	sealed, err := p.box.Seal(value, pendingBinding(st))
	if err != nil {
		return err
	}
	return p.b.Put(ctx, st, sealed, ttl)
}

func (p *fleetPending) Get(ctx context.Context, st string) ([]byte, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, pendingWait)
	defer cancel()
	e, err := p.b.Get(ctx, st)
	if errors.Is(err, state.ErrNoKey) {
		return nil, 0, grants.ErrUnknownState
	}
	if err != nil {
		return nil, 0, err
	}
	plain, err := p.box.Open(e.Value, pendingBinding(st))
	if err != nil {
		return nil, 0, grants.ErrUnknownState
	}
	return plain, e.Revision, nil
}

func (p *fleetPending) Take(ctx context.Context, st string, rev uint64) error {
	ctx, cancel := context.WithTimeout(ctx, pendingWait)
	defer cancel()
	err := p.b.Delete(ctx, st, rev)
	if errors.Is(err, state.ErrKeyMoved) || errors.Is(err, state.ErrNoKey) {
		return grants.ErrUnknownState
	}
	return err
}

// grantNewsSubject carries a grant's news between the nodes.
const grantNewsSubject = "crewlet.grants.changed"

// grantNews is a grant that arrived, lapsed or was refused (Refused: why)
// on node Node.
type grantNews struct {
	Node    string `json:"node"`
	Server  string `json:"server"`
	Seat    string `json:"seat"`
	Refused string `json:"refused,omitempty"`
}

// tellGrant tells the other nodes of a change of a seat's grant made here.
func (h *Hub) tellGrant(server, seat string) {
	if h.opts.Fleet == nil || h.servers == nil || h.servers.grants == nil {
		return
	}
	n := grantNews{Node: h.opts.Fleet.Node, Server: server, Seat: seat}
	if st, why := h.servers.grants.State(server, seat); st == grants.Refused {
		n.Refused = why
	}
	b, _ := json.Marshal(n)
	if err := h.opts.Fleet.Bus.Publish(grantNewsSubject, b); err != nil {
		h.log.Warn("oauth_grant_untold", "server", server, "seat", seat, "error", err.Error(),
			"reason", "the other nodes learn of the grant when they next read it")
	}
}

// hearGrants follows the other nodes' grant news until stop: each is
// taken by the minter, and the seat reconciled here.
func (h *Hub) hearGrants() (stop func(), err error) {
	return h.opts.Fleet.Bus.Subscribe(grantNewsSubject, func(data []byte) {
		var n grantNews
		if json.Unmarshal(data, &n) != nil || n.Node == h.opts.Fleet.Node {
			return
		}
		h.servers.grants.Heard(n.Server, n.Seat, n.Refused)
		h.reconcileGrantSeat(n.Seat)
	})
}
