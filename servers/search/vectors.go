package search

import (
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers/state"
)

// A vector row, under vecPrefix KIND "\x00" ID:
//
//	version (1 byte, 1)
//	digest  (32 bytes): SHA-256 of the model's name, a NUL, and the text embedded
//	scope   (uvarint length, bytes)
//	model   (uvarint length, bytes)
//	dims    (uvarint)
//	vector  (dims float32, little-endian), scaled to length 1
//
// The digest is what tells a stale vector from a current one: a document
// whose text (or the model) changed has another digest and is embedded
// again. The scope is kept beside the vector so a narrowed search need not
// read every document, and so a document moved to another scope is updated
// without calling the provider.
const vecRowVersion = 1

type digest [32]byte

func textDigest(model, text string) digest {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var d digest
	h.Sum(d[:0])
	return d
}

// vecRow is one document's vector.
type vecRow struct {
	digest digest
	scope  string
	model  string
	vec    []float32 // unit length
}

func vecKindPrefix(kind string) []byte { return []byte(vecPrefix + kind + "\x00") }

func vecKey(kind, id string) []byte { return append(vecKindPrefix(kind), id...) }

func encodeVecRow(v vecRow) []byte {
	b := make([]byte, 0, 1+32+len(v.scope)+len(v.model)+12+4*len(v.vec))
	b = append(b, vecRowVersion)
	b = append(b, v.digest[:]...)
	b = binary.AppendUvarint(b, uint64(len(v.scope)))
	b = append(b, v.scope...)
	b = binary.AppendUvarint(b, uint64(len(v.model)))
	b = append(b, v.model...)
	b = binary.AppendUvarint(b, uint64(len(v.vec)))
	for _, f := range v.vec {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

var errBadRow = errors.New("malformed vector row")

func decodeVecRow(b []byte) (vecRow, error) {
	var v vecRow
	if len(b) < 33 || b[0] != vecRowVersion {
		return v, errBadRow
	}
	copy(v.digest[:], b[1:33])
	b = b[33:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok bool
	if v.scope, ok = str(); !ok {
		return v, errBadRow
	}
	if v.model, ok = str(); !ok {
		return v, errBadRow
	}
	dims, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) != 4*dims {
		return v, errBadRow
	}
	b = b[k:]
	v.vec = make([]float32, dims)
	for i := range v.vec {
		v.vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// normalize scales v to length 1 in place; a zero vector stays zero and
// matches nothing.
func normalize(v []float32) {
	var sum float64
	for _, f := range v {
		sum += float64(f) * float64(f)
	}
	if sum == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}

// vectors is the kind's vectors for the current model, in memory: a
// search ranks by meaning with a brute-force scan, which at ten thousand
// documents costs a few milliseconds and needs no index to keep in step.
// The pebble rows are the durable copy; only the embedder changes either.
type vectors struct {
	model string
	mu    sync.RWMutex
	rows  map[string]vecRow
}

// loadVectors reads the kind's vector rows of model from the node's store.
// Rows of another model are left for the embedder to replace.
func loadVectors(node *state.Node, kind, model string) (*vectors, error) {
	vs := &vectors{model: model, rows: map[string]vecRow{}}
	err := node.View(func(r pebble.Reader) error {
		return scanVecRows(r, kind, func(id string, v vecRow) error {
			if v.model == model {
				vs.rows[id] = v
			}
			return nil
		})
	})
	return vs, err
}

// scanVecRows calls fn with every vector row of kind, of any model.
func scanVecRows(r pebble.Reader, kind string, fn func(id string, v vecRow) error) error {
	prefix := vecKindPrefix(kind)
	upper := append(vecKindPrefix(kind)[:len(prefix)-1], 1) // the NUL after kind, plus one
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		id := string(it.Key()[len(prefix):])
		v, err := decodeVecRow(it.Value())
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("vector of %q: %w", id, err)
		}
		if err := fn(id, v); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

func (vs *vectors) get(id string) (vecRow, bool) {
	vs.mu.RLock()
	defer vs.mu.RUnlock()
	v, ok := vs.rows[id]
	return v, ok
}

func (vs *vectors) put(id string, v vecRow) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.rows[id] = v
}

func (vs *vectors) drop(id string) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	delete(vs.rows, id)
}

func (vs *vectors) len() int {
	vs.mu.RLock()
	defer vs.mu.RUnlock()
	return len(vs.rows)
}

// semanticHit is one document ranked by meaning.
type semanticHit struct {
	id    string
	score float64 // cosine similarity
}

// nearest answers the k documents whose vectors are closest to q (unit
// length), in scope when scope is set, best first.
func (vs *vectors) nearest(q []float32, scope string, k int) []semanticHit {
	if k <= 0 {
		return nil
	}
	h := make(hitHeap, 0, k)
	vs.mu.RLock()
	for id, v := range vs.rows {
		if (scope != "" && v.scope != scope) || len(v.vec) != len(q) {
			continue
		}
		var dot float32
		for i, f := range v.vec {
			dot += f * q[i]
		}
		s := float64(dot)
		switch {
		case len(h) < k:
			heap.Push(&h, semanticHit{id, s})
		case s > h[0].score || (s == h[0].score && id < h[0].id):
			h[0] = semanticHit{id, s}
			heap.Fix(&h, 0)
		}
	}
	vs.mu.RUnlock()
	out := make([]semanticHit, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(semanticHit)
	}
	return out
}

// hitHeap is a min-heap by score (ties: the greater id is smaller), so its
// root is the hit to drop first.
type hitHeap []semanticHit

func (h hitHeap) Len() int { return len(h) }
func (h hitHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].id > h[j].id
}
func (h hitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)   { *h = append(*h, x.(semanticHit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
