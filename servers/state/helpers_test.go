package state

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/goleak"

	"github.com/crewlet/hub/authority"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

// notes is the projector the tests write through. A payload sets key to
// value and counts how many times the key was written, so a test can see
// that an operation had exactly one effect. Flags in the payload make it
// misbehave on purpose.
type notes struct {
	// gate, when set, is waited on before every Apply (to hold the
	// projection back).
	gate chan struct{}
}

type notePayload struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Refuse   bool   `json:"refuse,omitempty"`
	Panic    bool   `json:"panic,omitempty"`
	Fail     bool   `json:"fail,omitempty"`
	Reserved bool   `json:"reserved,omitempty"`
	// Raw names a key the projector writes as it is, beside its note.
	Raw string `json:"raw,omitempty"`
	// NoResult: the projector answers no result at all.
	NoResult bool `json:"no_result,omitempty"`
	// Hold and Free name blobs the note refers to from now on, and no
	// longer.
	Hold string `json:"hold,omitempty"`
	Free string `json:"free,omitempty"`
}

func (notes) Name() string { return "note" }

func (p notes) Apply(b *pebble.Batch, r pebble.Reader, pos uint64, op Op) (json.RawMessage, error) {
	if p.gate != nil {
		<-p.gate
	}
	var pl notePayload
	if err := json.Unmarshal(op.Payload, &pl); err != nil {
		return nil, authority.Refuse(authority.Invalid, "payload: %v", err)
	}
	if pl.Key == "" {
		return nil, authority.Refuse(authority.Invalid, "a note needs a key")
	}
	// Write before failing, so the tests see that a refused op's writes are
	// thrown away.
	if err := b.Set([]byte("note/"+pl.Key), []byte(pl.Value), nil); err != nil {
		return nil, err
	}
	switch {
	case pl.Refuse:
		return nil, authority.Refuse(authority.Invalid, "note %s is refused on purpose", pl.Key)
	case pl.Panic:
		panic("note projector panics on purpose")
	case pl.Fail:
		return nil, errors.New("an unmarked failure")
	case pl.Reserved:
		if err := b.Set([]byte("\x00state/position"), u64(1), nil); err != nil {
			return nil, err
		}
	}
	if pl.Raw != "" {
		if err := b.Set([]byte(pl.Raw), []byte(pl.Value), nil); err != nil {
			return nil, err
		}
	}
	if pl.Hold != "" {
		if err := HoldBlob(b, pl.Hold); err != nil {
			return nil, err
		}
	}
	if pl.Free != "" {
		if err := FreeBlob(b, pl.Free); err != nil {
			return nil, err
		}
	}
	count := readCount(r, pl.Key) + 1
	if err := b.Set([]byte("count/"+pl.Key), u64(count), nil); err != nil {
		return nil, err
	}
	if pl.NoResult {
		return nil, nil
	}
	return json.Marshal(map[string]any{"key": pl.Key, "writes": count, "pos": pos, "by": op.Caller.Seat})
}

func readCount(r pebble.Reader, key string) uint64 {
	v, closer, err := r.Get([]byte("count/" + key))
	if err != nil {
		return 0
	}
	defer closer.Close()
	var n uint64
	for _, c := range v {
		n = n<<8 | uint64(c)
	}
	return n
}

func noteOp(tool string, pl notePayload) Op {
	payload, _ := json.Marshal(pl)
	return Op{Tool: tool, Args: payload, Kind: "note", Payload: payload,
		Caller: authority.Caller{Seat: "ada", Kind: authority.KindAgent}}
}

func openNode(t testing.TB, dir string, mod ...func(*Options)) *Node {
	t.Helper()
	opts := Options{Dir: dir, Projectors: []Projector{notes{}}}
	for _, m := range mod {
		m(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func readNote(t testing.TB, n *Node, key string) (value string, writes uint64, found bool) {
	t.Helper()
	err := n.View(func(r pebble.Reader) error {
		v, closer, err := r.Get([]byte("note/" + key))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, found = string(v), true
		closer.Close()
		writes = readCount(r, key)
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return value, writes, found
}

// ledgerRows counts the op ledger's rows.
func ledgerRows(t testing.TB, n *Node) int {
	t.Helper()
	rows := 0
	err := n.View(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(ledgerKey), UpperBound: []byte(ledgerKey + "\xff")})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			rows++
		}
		return it.Close()
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return rows
}

// jsOf finds the JetStream log under a node, through any wrapper that
// says what it wraps.
func jsOf(n *Node) *JetStreamLog {
	l := n.log
	for {
		switch v := l.(type) {
		case *JetStreamLog:
			return v
		case interface{ Unwrap() Log }:
			l = v.Unwrap()
		default:
			return nil
		}
	}
}

// logMsgs is how many entries the stream holds.
func logMsgs(t testing.TB, n *Node) uint64 {
	t.Helper()
	info, err := jsOf(n).stream.Info(context.Background())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

func asRefusal(t testing.TB, err error, class authority.Class) *authority.Refusal {
	t.Helper()
	var r *authority.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a refusal", err)
	}
	if r.Class != class {
		t.Fatalf("refusal class %s (%s), want %s", r.Class, r.Sentence, class)
	}
	return r
}

// asUnknown checks that err says the write's outcome is unknown (or, with
// cannotTell, that the ledger could not vouch for it) under id.
func asUnknown(t testing.TB, err error, id OpID, cannotTell bool) {
	t.Helper()
	var u *UnknownOutcome
	if !errors.As(err, &u) {
		t.Fatalf("error %v is not an unknown outcome", err)
	}
	if u.OpID != id || u.CannotTell != cannotTell {
		t.Fatalf("unknown outcome %+v, want op %s cannot-tell %v", u, id, cannotTell)
	}
}

func mustContain(t testing.TB, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not mention %q", s, p)
		}
	}
}

type pebbleReader = pebble.Reader
