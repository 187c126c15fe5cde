package search

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Key prefixes of the rows an Index keeps in the node's store; the layout
// is in the package documentation.
const (
	markPrefix = "\x01search/mark/"
	vecPrefix  = "\x01search/vec/"
)

// checkKind refuses a kind that could not be told apart from its neighbour
// in the key layout.
func checkKind(kind string) error {
	if kind == "" || strings.ContainsRune(kind, 0) {
		return fmt.Errorf("search: kind %q must be non-empty and hold no NUL", kind)
	}
	return nil
}

func markKindPrefix(kind string) []byte { return []byte(markPrefix + kind + "\x00") }

// markKey is where a change to id at pos is marked.
func markKey(kind string, pos uint64, id string) []byte {
	k := markKindPrefix(kind)
	k = binary.BigEndian.AppendUint64(k, pos)
	return append(k, id...)
}

// markBound is the first key of position pos: every mark at or after it
// sorts at or after this key.
func markBound(kind string, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(markKindPrefix(kind), pos)
}

// Touch records, in a projector's batch at log position pos, that document
// id of kind changed: created, edited, deleted, hidden or moved to another
// scope. The Index of that kind re-reads the document from the projection
// once the batch has committed. Touching a document whose searchable text
// did not change is harmless, only wasted work.
func Touch(b *pebble.Batch, pos uint64, kind, id string) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("search: touch of an empty document id")
	}
	return b.Set(markKey(kind, pos, id), nil, nil)
}

// mark is one change a projector recorded.
type mark struct {
	pos uint64
	id  string
}

// readMarks reads the marks of kind after position after, up to and
// including position upTo, in position order. It stops early, at the end
// of a position, once it holds max marks, so a long backlog is taken in
// rounds of bounded size; through is the position the marks read cover.
func readMarks(r pebble.Reader, kind string, after, upTo uint64, max int) (marks []mark, through uint64, err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: markBound(kind, after+1), UpperBound: markBound(kind, upTo+1)})
	if err != nil {
		return nil, 0, err
	}
	through = upTo
	plen := len(markKindPrefix(kind))
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < plen+8 {
			continue // not a mark this package wrote
		}
		pos := binary.BigEndian.Uint64(k[plen : plen+8])
		if len(marks) >= max && pos != marks[len(marks)-1].pos {
			through = marks[len(marks)-1].pos
			break
		}
		marks = append(marks, mark{pos: pos, id: string(k[plen+8:])})
	}
	return marks, through, it.Close()
}

// pruneMarks deletes the marks of kind at or below through: the keyword
// index holds that position durably, so they are needed no more.
func pruneMarks(b *pebble.Batch, kind string, through uint64) error {
	return b.DeleteRange(markBound(kind, 0), markBound(kind, through+1), nil)
}
