package state

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/segmentio/encoding/json"
)

// First-party servers keep their projection rows as JSON under string keys
// of their own prefix; these are how every one of them reads and
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
	if err := DecodeJSON(key, b, v); err != nil {
		return false, err
	}
	return true, nil
}

// DecodeJSON decodes a row read at key (by an iterator, or as another row's
// value) into v, as GetJSON does. An iterator's key is taken as the bytes it
// is, so a walk over many rows builds no string for a key unless its row
// is broken.
func DecodeJSON[K string | []byte](key K, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %q: %w", key, err)
	}
	return nil
}

// SetJSON writes v as the row at key in b.
func SetJSON(b *pebble.Batch, key string, v any) error {
	data, err := EncodeJSON(v)
	if err != nil {
		return err
	}
	return b.Set([]byte(key), data, nil)
}

// EncodeJSON is v as SetJSON writes it, for a value written under more
// than one key.
func EncodeJSON(v any) ([]byte, error) { return json.Marshal(v) }

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
