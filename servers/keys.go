package servers

import "github.com/crewlet/hub/authority"

// An operator names the operation a write is with a key (the
// Idempotency-Key of /operator/act, carried as Caller.Operation): scoped to
// the credential that sent it, the key names one call. Its op_id is minted
// from the key (state.KeyedOpID) at the instant the key first wrote, kept
// like a turn's start, so the same request sent again is the same operation
// and lands once (OPS-6), and the same key with another call shares the
// first one's stem, which is how it is refused before anything is written.

// keyScope is the retry scope of an operator's key: the key under the
// credential (and seat) that sent it.
func keyScope(c authority.Caller) string {
	return "key\x00" + c.OperatorID + "\x00" + c.Seat + "\x00" + c.Operation
}

// claimKey refuses a call whose key already names another call (OPS-6):
// one this node's ledger holds, or one being written on this node now.
// Otherwise it holds the key for the call until release is called.
func (w *Writes) claimKey(call *Call) (release func(), err error) {
	stem := call.ID.Stem()
	w.mu.Lock()
	held, ok := w.keys[stem]
	switch {
	case ok && held.id != call.ID:
		w.mu.Unlock()
		return nil, keyTaken(call)
	case ok:
		held.calls++
	default:
		held = &keyClaim{id: call.ID, calls: 1}
		w.keys[stem] = held
	}
	w.mu.Unlock()
	release = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if held.calls--; held.calls == 0 {
			delete(w.keys, stem)
		}
	}
	_, other, err := w.node.OtherCall(call.ID)
	if err == nil && other {
		err = keyTaken(call)
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

func keyTaken(call *Call) *authority.Refusal {
	return authority.Refuse(authority.Invalid, "The Idempotency-Key %q already names another request (another tool, or other arguments), so nothing was written. A key names one request: send that one unchanged to finish it, or send this one under a new key.", call.Caller.Operation).
		WithData("idempotency_key", call.Caller.Operation)
}
