package state

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crewlet/hub/authority"
)

// OpID names one operation: one call of one tool with one set of arguments.
//
// Its text is "op_" + 12 hex digits of the minting time in Unix milliseconds
// + 12 hex digits that make it unique + "." + a digest of the tool name and
// the canonical arguments. The time lets a node tell whether its ledger
// reaches back far enough to vouch for the operation; the digest lets any
// node refuse the id when it comes back attached to a different call without
// having to look anything up.
type OpID string

const (
	opIDPrefix = "op_"
	opIDStamp  = 12 // hex digits of Unix milliseconds (good until the year 10889)
	opIDUnique = 12 // hex digits; 48 bits, unique within one millisecond
	digestLen  = 26 // base32 characters of 16 digest bytes
)

// digestEncoding is lower-case so an op_id reads as one token.
var digestEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewOpID mints a fresh operation id for a call of tool with args. Each call
// returns a different id: it is for a call nobody has made before.
func NewOpID(tool string, args json.RawMessage) OpID {
	var unique [opIDUnique / 2]byte
	if _, err := rand.Read(unique[:]); err != nil {
		// crypto/rand does not fail on supported platforms; if it ever did,
		// an id that is not unique would merge two operations, so stop.
		panic(fmt.Sprintf("state: crypto/rand: %v", err))
	}
	return makeOpID(time.Now(), unique[:], tool, args)
}

// DeriveOpID is the id of a call made within scope: the same scope, tool and
// arguments always give the same id, so a retried call (a turn re-run under
// the same turn key) is the same operation and lands once, while a reworded
// call is a new one. minted should be when the scope began (the turn's
// start), and must be the same on every retry.
func DeriveOpID(scope string, minted time.Time, tool string, args json.RawMessage) OpID {
	h := sha256.New()
	h.Write([]byte("crewlet/op-scope\x00"))
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(digestOf(tool, args)))
	return makeOpID(minted, h.Sum(nil)[:opIDUnique/2], tool, args)
}

// KeyedOpID is the id of a call its caller named itself, under a key
// (an operator's Idempotency-Key), in scope (the key and whose it is):
// unlike DeriveOpID, every call under one scope has the same stem, and only
// the digest after the dot tells the calls apart. So the node can tell a
// key brought back with the call it named (the same id) from the same key
// brought back with another call (the same stem, another digest), and
// refuse the second before anything is written (OPS-6).
func KeyedOpID(scope string, minted time.Time, tool string, args json.RawMessage) OpID {
	h := sha256.New()
	h.Write([]byte("crewlet/op-key\x00"))
	h.Write([]byte(scope))
	return makeOpID(minted, h.Sum(nil)[:opIDUnique/2], tool, args)
}

func makeOpID(minted time.Time, unique []byte, tool string, args json.RawMessage) OpID {
	var stamp [8]byte
	binary.BigEndian.PutUint64(stamp[:], uint64(minted.UnixMilli()))
	return OpID(opIDPrefix + hex.EncodeToString(stamp[2:]) + hex.EncodeToString(unique) + "." + digestOf(tool, args))
}

// ParseOpID checks that s has the shape of an op_id. It cannot tell whether
// the id was ever answered; that is the ledger's business.
func ParseOpID(s string) (OpID, error) {
	rest, ok := strings.CutPrefix(s, opIDPrefix)
	if !ok {
		return "", errors.New("an op_id starts with op_")
	}
	head, digest, ok := strings.Cut(rest, ".")
	if !ok || len(head) != opIDStamp+opIDUnique || len(digest) != digestLen {
		return "", errors.New("an op_id is op_, 24 hex digits, a dot and 26 letters or digits")
	}
	if _, err := hex.DecodeString(head); err != nil || strings.ToLower(head) != head {
		return "", errors.New("an op_id is op_, 24 lower-case hex digits, a dot and 26 letters or digits")
	}
	if _, err := digestEncoding.DecodeString(digest); err != nil {
		return "", errors.New("the part of an op_id after the dot is not a digest")
	}
	return OpID(s), nil
}

// CheckOpID decides whether an op_id a caller brought back may name a call
// of tool with args, and answers it parsed. It is the one place that says
// what is wrong with an op_id (OPS-5): malformed, or handed out for another
// tool or other arguments. Both are refused invalid, before anything is
// read or written, because the op_id is the caller's input.
func CheckOpID(given, tool string, args json.RawMessage) (OpID, error) {
	id, err := ParseOpID(given)
	if err != nil {
		return "", authority.Refuse(authority.Invalid, "op_id %q is not an op_id this hub hands out (%v); nothing was written. Send it exactly as an earlier answer gave it, or leave it out to make a new operation.", given, err)
	}
	if !id.Matches(tool, args) {
		return "", authority.Refuse(authority.Invalid, "op_id %s was handed out for a different call (another tool, or other arguments), so nothing was written. It finishes only the call it came with, sent again unchanged; to make this call, leave op_id out.", id).
			WithData("op_id", given)
	}
	return id, nil
}

// Stem is id without its digest: which operation it is, not which call.
// It is "" for a malformed id.
func (id OpID) Stem() string {
	if !id.Valid() {
		return ""
	}
	stem, _, _ := strings.Cut(string(id), ".")
	return stem
}

// Valid reports whether id is well formed.
func (id OpID) Valid() bool {
	_, err := ParseOpID(string(id))
	return err == nil
}

// Matches reports whether id was minted for tool called with args (compared
// in canonical form, so key order and whitespace do not matter).
func (id OpID) Matches(tool string, args json.RawMessage) bool {
	_, digest, ok := strings.Cut(string(id), ".")
	return ok && id.Valid() && digest == digestOf(tool, args)
}

// Minted is when the id was minted, to the millisecond; zero if malformed.
func (id OpID) Minted() time.Time {
	if !id.Valid() {
		return time.Time{}
	}
	var stamp [8]byte
	if _, err := hex.Decode(stamp[2:], []byte(string(id)[len(opIDPrefix):len(opIDPrefix)+opIDStamp])); err != nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(stamp[:])))
}

func (id OpID) String() string { return string(id) }

// digestOf binds a tool name to its canonical arguments. The tool name is
// length-prefixed so no tool/arguments pair can be spliced into another.
func digestOf(tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte("crewlet/op\x00"))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(tool)))
	h.Write(n[:])
	h.Write([]byte(tool))
	if c, err := Canonical(args); err == nil {
		h.Write([]byte{'j'})
		h.Write(c)
	} else {
		// Not JSON: the bytes themselves are the call. A different domain
		// byte keeps them from colliding with any canonical document.
		h.Write([]byte{'r'})
		h.Write(args)
	}
	return digestEncoding.EncodeToString(h.Sum(nil)[:16])
}

// Canonical returns args in canonical JSON form: object keys sorted, no
// insignificant whitespace, numbers kept exactly as written, no HTML
// escaping. Empty input, null and {} are all the empty object, because a tool
// called with no arguments is the same call however the transport spelled
// "none".
func Canonical(args json.RawMessage) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys sorted and compact; json.Number keeps the
	// literal, so 1 and 1.0 stay different calls, as the caller wrote them.
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
