package artifacts

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// A turn's quotas (ART-3, ART-8), kept in the projection under its turn
// key, so every node counts the same and a retried operation — which lands
// once — is counted once. Only an agent's turn has them: a person's call
// carries no turn.
const (
	maxTurnPublishes     = 20
	maxArtifactPublishes = 10
	maxTurnBytes         = 128 << 20
	maxTurnDataOps       = 1000
)

type turnQuota struct {
	Publishes int            `json:"publishes,omitempty"`
	Per       map[string]int `json:"per,omitempty"`
	Bytes     int64          `json:"bytes,omitempty"`
	DataOps   int            `json:"data_ops,omitempty"`
}

func readQuota(r pebble.Reader, turn string) (turnQuota, error) {
	var q turnQuota
	if turn == "" {
		return q, nil
	}
	_, err := state.GetJSON(r, kQuota+turn, &q)
	return q, err
}

func quotaRefusal(format string, args ...any) error {
	return authority.Refuse(authority.TurnQuota, format+" Stop here and report what was done; nothing more of this kind is written in this turn.", args...)
}

// checkPublish is the publish quota: publishes per turn and per artifact,
// and the bytes a turn writes (versions and assets alike). publish is
// false for an asset, which counts bytes only.
func checkPublish(q turnQuota, id string, publish bool, bytes int64) error {
	switch {
	case publish && q.Publishes >= maxTurnPublishes:
		return quotaRefusal("This turn has published %d versions, as many as one turn may.", q.Publishes)
	case publish && q.Per[id] >= maxArtifactPublishes:
		return quotaRefusal("This turn has published %d versions of %s, as many as one turn may publish of one artifact.", q.Per[id], id)
	case q.Bytes+bytes > maxTurnBytes:
		return quotaRefusal("This would make %d bytes written in this turn, and a turn writes at most %d (128 MiB).", q.Bytes+bytes, maxTurnBytes)
	}
	return nil
}

// checkDataOps is the datastore quota: 1,000 ops a turn.
func checkDataOps(q turnQuota, ops int) error {
	if q.DataOps+ops > maxTurnDataOps {
		return quotaRefusal("This batch of %d ops would make %d datastore ops in this turn, and a turn writes at most %d.", ops, q.DataOps+ops, maxTurnDataOps)
	}
	return nil
}

// turnOf is the turn a write counts against: an agent's, or none.
func (a *applier) turnOf() string {
	if a.Op.Caller.Kind != authority.KindAgent {
		return ""
	}
	return a.Op.Caller.TurnKey
}

// countPublish checks and counts a publish (or an asset's bytes).
func (a *applier) countPublish(id string, publish bool, bytes int64) error {
	turn := a.turnOf()
	if turn == "" {
		return nil
	}
	q, err := readQuota(a.R, turn)
	if err != nil {
		return err
	}
	if err := checkPublish(q, id, publish, bytes); err != nil {
		return err
	}
	if publish {
		q.Publishes++
		if q.Per == nil {
			q.Per = map[string]int{}
		}
		q.Per[id]++
	}
	q.Bytes += bytes
	return state.SetJSON(a.B, kQuota+turn, q)
}

// countDataOps checks and counts a batch of datastore ops.
func (a *applier) countDataOps(ops int) error {
	turn := a.turnOf()
	if turn == "" {
		return nil
	}
	q, err := readQuota(a.R, turn)
	if err != nil {
		return err
	}
	if err := checkDataOps(q, ops); err != nil {
		return err
	}
	q.DataOps += ops
	return state.SetJSON(a.B, kQuota+turn, q)
}

// quotaOf reads the quota a seat's call counts against, for a tool's check
// before it writes.
func quotaOf(r pebble.Reader, c authority.Caller) (turnQuota, error) {
	if c.Kind != authority.KindAgent {
		return turnQuota{}, nil
	}
	return readQuota(r, c.TurnKey)
}
