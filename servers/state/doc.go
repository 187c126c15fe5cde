// Package state is the durable operation log of a node and the node's
// projection of it: every first-party write (tracker, knowledge, artifacts)
// becomes an Op, is appended to the Log, and is answered only once it is known
// where it stands.
//
// Ownership. A Node owns three things and releases all of them in Close: the
// Log (by default a JetStream stream served by a NATS server embedded in the
// process, with no listening port), the pebble database holding the
// projection, and one goroutine that follows the log. That goroutine is the
// only writer of the projection. It applies entries strictly in log order,
// each through the registered Projector of its kind, and commits the
// projector's writes, the op ledger row and the new position in one pebble
// batch, so the projection is never ahead of or behind the position it
// records. The projection can always be rebuilt from the log; deleting its
// directory and reopening does exactly that.
//
// Concurrency. Write, View, Vouches, Position and WaitFor may be called from
// any number of goroutines. Concurrent Writes are pipelined into the log (one
// connection, a bounded window of unacknowledged appends): on a single node
// the writes that arrive while a group is being appended go together as the
// next group, made durable by one fsync of the log's journal; in a fleet the
// servers fsync every entry. Either way every entry is durable before its
// writer is answered or any follower reads it, no writer waits for
// another's round trip, and the projection applies entries as they arrive
// rather than one caller at a time. View reads a pebble
// snapshot, so a reader sees a consistent projection at one position while
// the follower keeps applying. Projectors run only on the follower goroutine
// and must be deterministic: every node replays the same entries, so an
// Apply may depend only on the Op and on what it reads from the projection,
// never on the clock, randomness or the node it runs on.
//
// A fleet. Several nodes share one log: OpenCluster joins the embedded
// server to its peers' over routes (or connects to an operator's NATS), and
// the log, the blob store and the coordination buckets are replicated
// across them. Each node still projects the log into its own pebble
// database with its own follower, so every node reads its own projection
// and answers WaitFor for its own position. Seat leases (Leases) live in a
// coordination bucket whose keys expire on their own; a seat's writes are
// fenced on the seat's claim in the log (Options.Fence), so a node that
// lost the seat cannot write as it. Core pub/sub (Publish, Subscribe)
// carries what needs no keeping, such as heartbeats.
//
// Durability. A write is answered applied only after an fsync that covers
// its entry has returned, and nothing that covers an answered entry is
// deleted before another fsync covers it: the order of operations says so,
// never a clock. On a single node the fsync is the journal's (journal.go),
// and a journal segment is deleted only once the log has synced the
// stream's own files past it, which it does when it opens, right after
// the server has recovered the stream from them. Every data directory
// follows this one rule: a stream made before the journal moves onto it
// when the log opens. In a fleet the servers fsync every entry themselves.
//
// The op ledger maps an OpID to the answer its operation got. An OpID carries
// a digest of the tool and its canonical arguments, which lets Write refuse
// an op_id brought back with another call before anything is appended, and
// the ledger lets a retried operation answer what it answered the first time
// without landing twice, whether or not the log's own duplicate window still
// remembers it.
package state
