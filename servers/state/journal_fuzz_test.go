package state

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/nats-io/nats.go"
)

// appendRecordV1 encodes r as segments written before records carried
// headers did (journalMagicV1), for the tests that read such segments.
func appendRecordV1(b []byte, r journalRecord) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(8+len(r.data)))
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, r.pos)
	b = append(b, r.data...)
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+recordHead:], castagnoli))
	return b
}

// FuzzReadSegment: whatever a segment file holds (a crash can leave any
// prefix of a write, a disk any garbage), reading it does not panic, and
// what it reads is a prefix of the file: the header and records that
// encode back, in the segment's own format, to exactly the bytes they were
// read from, positions growing. A record's headers, whatever bytes they
// are, either parse or are refused without a panic.
func FuzzReadSegment(f *testing.F) {
	hdr := appendHeader(nil, nats.Header{"Nats-Msg-Id": {"op-4"}, "Crewlet-Kind": {"a", "b"}})
	seg := binary.BigEndian.AppendUint64([]byte(journalMagic), 3)
	seg = appendRecord(seg, journalRecord{pos: 4, hdr: hdr, data: []byte(`{"v":1}`)})
	seg = appendRecord(seg, journalRecord{pos: 5, data: nil})
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	v1 := binary.BigEndian.AppendUint64([]byte(journalMagicV1), 3)
	v1 = appendRecordV1(v1, journalRecord{pos: 4, data: []byte(`{"v":1}`)})
	v1 = appendRecordV1(v1, journalRecord{pos: 5, data: nil})
	f.Add(v1)
	f.Add(v1[:len(v1)-3])
	f.Add([]byte(journalMagic))
	f.Add([]byte(journalMagic)[:7])
	f.Add([]byte("not a segment"))
	f.Fuzz(func(t *testing.T, b []byte) {
		version, base, recs, err := readSegment(b)
		if err != nil {
			if len(recs) != 0 {
				t.Fatal("records read from what is not a segment")
			}
			return
		}
		if len(b) < segmentHead {
			if len(recs) != 0 || base != 0 {
				t.Fatal("records read from an incomplete header")
			}
			return
		}
		magic, encode := journalMagic, appendRecord
		if version == 1 {
			magic, encode = journalMagicV1, appendRecordV1
		}
		again := binary.BigEndian.AppendUint64([]byte(magic), base)
		last := base
		for _, r := range recs {
			if r.pos <= last {
				t.Fatalf("position %d after %d", r.pos, last)
			}
			if version == 1 && r.hdr != nil {
				t.Fatal("headers read from a segment whose records have none")
			}
			if h, err := parseHeader(r.hdr); err == nil && !bytes.Equal(appendHeader(nil, h), r.hdr) && isSorted(r.hdr) {
				t.Fatalf("headers %q parse to %v, which encodes otherwise", r.hdr, h)
			}
			last = r.pos
			again = encode(again, r)
		}
		if !bytes.HasPrefix(b, again) {
			t.Fatal("what was read does not encode back to the start of the segment")
		}
	})
}

// isSorted reports whether encoded headers list their keys in order, as
// appendHeader writes them; only then must they encode back the same.
func isSorted(b []byte) bool {
	prev := ""
	for len(b) >= 2 {
		k := int(binary.BigEndian.Uint16(b))
		if k > len(b)-6 {
			return false
		}
		key := string(b[2 : 2+k])
		if key < prev {
			return false
		}
		prev = key
		n := int(binary.BigEndian.Uint32(b[2+k:]))
		if n > len(b)-6-k {
			return false
		}
		b = b[6+k+n:]
	}
	return len(b) == 0
}
