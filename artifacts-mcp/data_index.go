package artifacts

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// A collection's rows are kept beside two kinds of index rows: one per
// indexed column value (what query_artifact_data walks) and one per change
// (what read_artifact_data's since walks), both maintained by writeRow.

func changeKey(id, coll string, pos uint64, doc string) string {
	return fmt.Sprintf("%s%s/%s/%016x/%s", kChange, id, coll, pos, doc)
}

func indexPrefix(id, coll, col string) string { return kIndex + id + "/" + coll + "/" + col + "/" }

// indexKeys are a row's entries in its collection's indexes.
func indexKeys(id string, coll *collection, rw *row) []string {
	var out []string
	for _, col := range coll.Columns {
		if !col.Indexed {
			continue
		}
		if enc, ok := encodeValue(rw.Data[col.Name]); ok {
			out = append(out, indexPrefix(id, coll.Name, col.Name)+enc+"\x00"+rw.Doc)
		}
	}
	return out
}

// encodeValue is an indexed value in an order-preserving encoding: numbers
// compare as numbers, strings as bytes, and each type in its own range.
func encodeValue(v any) (string, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return "b1", true
		}
		return "b0", true
	case float64:
		bits := math.Float64bits(x)
		if x >= 0 {
			bits ^= 1 << 63
		} else {
			bits = ^bits
		}
		return "n" + hex.EncodeToString(binary.BigEndian.AppendUint64(nil, bits)), true
	case string:
		return "s" + x, true
	}
	return "", false
}
