package servers

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/segmentio/encoding/json"

	"github.com/crewlet/hub/servers/state"
)

// Apply is one operation being applied by a first-party server's
// projector: the batch its changes go into, a reader that already sees
// them, the operation and who made it. See state.Projector for what a
// projector may and may not do.
type Apply struct {
	B   *pebble.Batch
	R   pebble.Reader
	Pos uint64
	Op  state.Op
	// By is the author the operation writes as.
	By  Author
	seq int
}

// At is when the operation was asked for: the time every node records.
func (a *Apply) At() time.Time { return a.Op.At.UTC() }

// Payload decodes the operation's payload into v.
func (a *Apply) Payload(v any) error {
	if err := json.Unmarshal(a.Op.Payload, v); err != nil {
		return fmt.Errorf("decode payload of %s: %w", a.Op.Kind, err)
	}
	return nil
}

// Seq numbers the rows one operation adds to a feed (activity, wakes):
// with the position it makes a key no other operation can make.
func (a *Apply) Seq() int {
	a.seq++
	return a.seq
}

// Projector adapts a first-party apply function to state.Projector; what
// it answers is recorded as the operation's result, as JSON.
func Projector(kind string, apply func(*Apply) (any, error)) state.Projector {
	return projector{kind, apply}
}

type projector struct {
	kind  string
	apply func(*Apply) (any, error)
}

func (p projector) Name() string { return p.kind }

func (p projector) Apply(b *pebble.Batch, r pebble.Reader, pos uint64, op state.Op) (json.RawMessage, error) {
	res, err := p.apply(&Apply{B: b, R: r, Pos: pos, Op: op, By: AuthorOf(op.Caller)})
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
