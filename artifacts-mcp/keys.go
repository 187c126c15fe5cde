package artifacts

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crewlet/hub/servers/state"
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

func versionKey(id string, n int) string { return fmt.Sprintf("%s%s/%08d", kVersion, id, n) }

// readArtifact reads an artifact by id; nil when there is none.
func readArtifact(r pebble.Reader, id string) (*artifact, error) {
	id = strings.TrimSpace(id)
	if id == "" || strings.Contains(id, "/") {
		return nil, nil
	}
	var a artifact
	found, err := state.GetJSON(r, kArtifact+id, &a)
	if err != nil || !found {
		return nil, err
	}
	return &a, nil
}

// readVersion reads version n of an artifact; nil when there is none.
func readVersion(r pebble.Reader, id string, n int) (*version, error) {
	var v version
	found, err := state.GetJSON(r, versionKey(id, n), &v)
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
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: state.Upper(prefix)})
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
