package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/segmentio/encoding/json"
)

// First-party servers keep their projection rows as JSON under string keys
// of their own prefix; these are the three ways every one of them reads and
// writes such rows. Every read of a first-party tool decodes rows, so they
// go through segmentio's encoding/json (the go-sdk's own): the same
// behaviour as the standard library's, at about a fifth of its CPU for a
// row.

// GetJSON reads the row at key into v; found is false when there is none.
// A row that does not decode is an error naming its key: the projection is
// the node's own, so a broken row is the node's fault, not the caller's.
func GetJSON(r pebble.Reader, key string, v any) (found bool, err error) {
	b, closer, err := r.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %q: %w", key, err)
	}
	return true, nil
}

// SetJSON writes v as the row at key in b.
func SetJSON(b *pebble.Batch, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set([]byte(key), data, nil)
}

// Upper is the exclusive upper bound of every key starting with prefix;
// keys are text, so no key of the prefix holds the byte 0xff.
func Upper(prefix string) []byte { return []byte(prefix + "\xff") }

// Exists reports whether there is a row at key.
func Exists(r pebble.Reader, key string) (bool, error) {
	_, closer, err := r.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}
