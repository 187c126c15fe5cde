package upstream

import (
	"context"
	"time"
)

// A call's connection to a streamable HTTP server is kept for the next
// call: the SDK's client reads the rest of an answered stream after it has
// handed the answer over, and the connection returns to the pool only once
// that read reaches the stream's end. These are the wire's part in letting
// that read finish.

// drainBound bounds how long a call's stream, answered, may stay open for
// the SDK to read to its end: a server that keeps it open longer costs its
// connection, not a goroutine and a connection for good.
const drainBound = 5 * time.Second

// drainFor gives the context a call's POST is written with. It ends with
// ctx while the call waits for its answer. Once answered (w.answer), the
// SDK's client still reads the stream to its end, off the caller's way,
// so that its connection can carry the next call; the caller's context
// ends the moment the call returns (the router cancels its per-call
// timeout), and ending the POST with it would cut that read and close the
// connection, so every call would dial the server anew.
//
// The POST ends with life too (the session's supervision, which ends
// when the instance closes), so no read outlives the instance.
func (w *wire) drainFor(ctx, life context.Context) context.Context {
	post, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopCall, stopLife := context.AfterFunc(ctx, cancel), context.AfterFunc(life, cancel)
	w.stop = stopCall
	w.release = func() {
		stopCall()
		stopLife()
		cancel()
	}
	return post
}

// answer lets the POST outlive the call until its stream is read to the
// end, or drainBound. A call that ends without an answer (done false)
// ends its POST at once, as its context would have.
func (w *wire) answer(done bool) {
	if !done || !w.stop() {
		w.release()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answered = true
	if w.open == 0 {
		w.release()
		return
	}
	w.bound = time.AfterFunc(drainBound, w.release)
}

func (w *wire) bodyOpened() {
	w.mu.Lock()
	w.open++
	w.mu.Unlock()
}

// bodyClosed is the SDK done with an answer's body: read to its end, or
// given up on.
func (w *wire) bodyClosed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open--
	if w.answered && w.open == 0 {
		if w.bound != nil {
			w.bound.Stop()
		}
		w.release()
	}
}
