package state

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzReadSegment: whatever a segment file holds (a crash can leave any
// prefix of a write, a disk any garbage), reading it does not panic, and
// what it reads is a prefix of the file: the header and records that
// encode back to exactly the bytes they were read from, positions growing.
func FuzzReadSegment(f *testing.F) {
	seg := binary.BigEndian.AppendUint64([]byte(journalMagic), 3)
	seg = appendRecord(seg, journalRecord{pos: 4, data: []byte(`{"v":1}`)})
	seg = appendRecord(seg, journalRecord{pos: 5, data: nil})
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add([]byte(journalMagic))
	f.Add([]byte("not a segment"))
	f.Fuzz(func(t *testing.T, b []byte) {
		base, recs, err := readSegment(b)
		if err != nil {
			if len(recs) != 0 {
				t.Fatal("records read from what is not a segment")
			}
			return
		}
		if len(b) < len(journalMagic)+8 {
			if len(recs) != 0 || base != 0 {
				t.Fatal("records read from an incomplete header")
			}
			return
		}
		again := binary.BigEndian.AppendUint64([]byte(journalMagic), base)
		last := base
		for _, r := range recs {
			if r.pos <= last {
				t.Fatalf("position %d after %d", r.pos, last)
			}
			last = r.pos
			again = appendRecord(again, r)
		}
		if !bytes.HasPrefix(b, again) {
			t.Fatal("what was read does not encode back to the start of the segment")
		}
	})
}
