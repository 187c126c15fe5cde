package artifacts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout of the artifact store in the node's projection.
const (
	kArtifact = "art/a/"     // + id -> artifact
	kVersion  = "art/v/"     // + id/%08d -> version
	kAsset    = "art/asset/" // + id/path -> fileRef
	kHistory  = "art/h/"     // + id/%016x pos/%04d -> historyRow
	kBlob     = "art/blob/"  // + id/blob name: every blob the artifact holds, freed at purge
	kQuota    = "art/quota/" // + turn key -> turnQuota
	kSchema   = "art/schema/"
	kRow      = "art/row/" // + id/collection/doc -> row
	kIndex    = "art/ix/"  // + id/collection/column/encoded value\x00doc
	kChange   = "art/chg/" // + id/collection/%016x pos/doc: what changed when
)

// upper is the exclusive upper bound of every key starting with prefix.
func upper(prefix string) []byte { return []byte(prefix + "\xff") }

func versionKey(id string, n int) string { return fmt.Sprintf("%s%s/%08d", kVersion, id, n) }

func getJSON(r pebble.Reader, key string, v any) (bool, error) {
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

func setJSON(b *pebble.Batch, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set([]byte(key), data, nil)
}

// readArtifact reads an artifact by id; nil when there is none.
func readArtifact(r pebble.Reader, id string) (*artifact, error) {
	id = strings.TrimSpace(id)
	if id == "" || strings.Contains(id, "/") {
		return nil, nil
	}
	var a artifact
	found, err := getJSON(r, kArtifact+id, &a)
	if err != nil || !found {
		return nil, err
	}
	return &a, nil
}

// readVersion reads version n of an artifact; nil when there is none.
func readVersion(r pebble.Reader, id string, n int) (*version, error) {
	var v version
	found, err := getJSON(r, versionKey(id, n), &v)
	if err != nil || !found {
		return nil, err
	}
	return &v, nil
}

// each calls fn with the key and value of every row under prefix, in key
// order, until fn answers false.
func each(r pebble.Reader, prefix, after string, fn func(k, v []byte) (bool, error)) error {
	lower := []byte(prefix)
	if after != "" {
		lower = append([]byte(prefix+after), 0)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper(prefix)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		more, err := fn(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !more {
			break
		}
	}
	return it.Close()
}
