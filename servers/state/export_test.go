package state

import (
	"testing"
)

// The helpers of this package's tests, for its external tests
// (package state_test), which use the state test kit.
type (
	Notes       = notes
	NotePayload = notePayload
)

var (
	NoteOp       = noteOp
	ReadNote     = readNote
	LedgerRows   = ledgerRows
	LogMsgs      = logMsgs
	AsRefusal    = asRefusal
	AsUnknown    = asUnknown
	MustContain  = mustContain
	EncodeRecord = encodeRecord
)

// OpenNode opens a node with the test projector; mod adjusts its options.
func OpenNode(t testing.TB, dir string, mod ...func(*Options)) *Node { return openNode(t, dir, mod...) }
