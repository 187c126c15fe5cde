package state

import (
	"context"
	"errors"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// ReplicaHealth is one copy of a replicated stream as its leader sees it.
type ReplicaHealth struct {
	Node string `json:"node"`
	// Current says the copy has everything the leader has: it can stand
	// in for another copy that goes.
	Current bool   `json:"current"`
	Offline bool   `json:"offline,omitempty"`
	Lag     uint64 `json:"lag,omitempty"`
}

// StreamHealth is one of a fleet's replicated streams: who leads it and
// how its other copies keep up. A stream with no Leader takes no writes.
type StreamHealth struct {
	Name     string          `json:"name"`
	Leader   string          `json:"leader"`
	Replicas []ReplicaHealth `json:"replicas"`
	Error    string          `json:"error,omitempty"`
}

// Settled reports whether every stream has a leader and every other copy
// is current: the fleet can lose any one node without a write stalling.
func Settled(streams []StreamHealth, replicas int) bool {
	for _, s := range streams {
		if s.Leader == "" || s.Error != "" || len(s.Replicas) != replicas-1 {
			return false
		}
		for _, r := range s.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
	}
	return len(streams) > 0
}

// Health reports the log, the blob store and the lease bucket as their
// leaders see them, for GET /fleet. A stream that does not answer is
// reported with its error, not left out.
func (l *JetStreamLog) Health(ctx context.Context) []StreamHealth {
	names := []string{streamName, blobStream, "KV_" + leaseBucket}
	out := make([]StreamHealth, 0, len(names))
	for _, name := range names {
		h := StreamHealth{Name: name, Replicas: []ReplicaHealth{}}
		s, err := l.js.Stream(ctx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(ctx)
		}
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			continue // not made yet (blobs open when first needed)
		case err != nil:
			h.Error = err.Error()
		case info.Cluster != nil:
			h.Leader = info.Cluster.Leader
			for _, p := range info.Cluster.Replicas {
				h.Replicas = append(h.Replicas, ReplicaHealth{Node: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag})
			}
			slices.SortFunc(h.Replicas, func(a, b ReplicaHealth) int {
				if a.Node < b.Node {
					return -1
				}
				if a.Node > b.Node {
					return 1
				}
				return 0
			})
		}
		out = append(out, h)
	}
	return out
}
