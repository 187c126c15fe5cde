// Package servers is the kit every first-party MCP server of the hub is built
// with: how a server learns who is calling (the caller in the request's
// metadata, trusted only from a connection it was told to trust), how a
// refusal is said as a tool result carrying its class, how a tool is declared
// with its three-valued hints and where it delivers, and the metadata keys the
// hub and the servers agree on.
//
// A server built with this kit behaves the same mounted in-process by the hub
// and run standalone over stdio or HTTP; only its Trust differs.
package servers

// Version is the version of the hub and of every first-party server, as
// each identifies itself in handshakes.
const Version = "0.1.0"

// Metadata keys shared by the hub and first-party servers.
const (
	// MetaCaller carries the authority.Caller of a tools/call request.
	MetaCaller = "crewlet/caller"
	// MetaProof carries the shared secret that proves the caller metadata
	// comes from a party the server trusts.
	MetaProof = "crewlet/proof"
	// MetaRefusal carries the refusal class on a refused tool result.
	MetaRefusal = "crewlet/refusal"
	// MetaHints carries a tool's three-valued hints on its listing, because
	// the protocol's boolean annotations cannot say "unknown".
	MetaHints = "crewlet/hints"
	// MetaDelivers carries where a tool's call puts something in front of
	// somebody outside the turn.
	MetaDelivers = "crewlet/delivers"
	// MetaSource carries the catalogue source of a tool on the hub's own
	// listings (builtin or mcp:<server>).
	MetaSource = "crewlet/source"
	// MetaAudience carries AudienceOperator on a tool that only people reach
	// (the operator surface) and no seat is ever offered.
	MetaAudience = "crewlet/audience"
)

// AudienceOperator marks a tool served on the operator surface only.
const AudienceOperator = "operator"
