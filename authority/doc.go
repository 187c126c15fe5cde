// Package authority holds who may act and how a refusal is said: the
// principals behind operator credentials, the caller of a tool call (seat,
// kind, requester, turn, operator credential), the company directory of seats
// and units, and the one registry of refusal classes every tool answers with.
//
// It imports no other package of this module, so every layer above it (the
// first-party servers, the hub, the agent runtime) speaks one vocabulary.
// Everything here is either immutable once built or guarded by its own lock,
// and is safe for concurrent use.
package authority
