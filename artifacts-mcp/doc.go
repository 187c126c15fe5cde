// Package artifacts is the artifact store and its datastore, served as a
// first-party MCP server on nodes that can take uploads (CAT-5): the pages,
// docs, slides, dashboards and sheets agents and people make, their
// versions and assets, and each artifact's small datastore of collections
// and rows. It imports the servers kit, authority and (to stream a
// project's files) the tracker, never the hub.
//
// Authority. Every verb is decided by the table in package authority
// (authority.DecideArtifact), once for the caller and once for whom its
// turn acts (the requester ceiling); access.go works out each party's
// relation to the artifact and asks. A caller with no relation is answered
// exactly as an id nothing holds.
//
// Writes go through the servers kit's write path: a tool decides a payload
// from the arguments and the projection as it reads it now, and the
// projectors here — the only code that changes artifacts — decide again,
// in log order, with the same rule functions. Bytes are never in the log
// or the projection: each file is a blob of the node's blob store, put and
// read back against its SHA-256 before the operation naming it is written,
// and freed (erased) when an asset is replaced or the artifact purged.
//
// Files hold a tool group each: artifacts (create, update), publish,
// read (get, list), shares, assets, data_write, data_read and schema (the
// datastore; its model and rules in data.go, its indexes in
// data_index.go), sources; besides them
// files.go (where bytes come from), quota.go (a turn's quotas, kept in the
// projection), presence.go (rooms in a TTL bucket), trash.go (a person's
// trash, restore, purge and transfer, and the file route's reader, as
// Store).
//
// A server keeps nothing authoritative and is safe for concurrent use; it
// starts no goroutine. Its presence bucket is opened on first use.
package artifacts
