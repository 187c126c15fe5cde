// Package search is the one search of the hub: the tracker's items and the
// knowledge base's pages are found through it, by keyword, by meaning, or
// by both fused.
//
// Keyword ranking is a bleve index on disk; meaning is a vector per
// document from an OpenAI-compatible /v1/embeddings provider, kept in the
// node's pebble store; hybrid fuses the two rankings by reciprocal rank.
// Both are projections of the log: a server's projectors call Touch in the
// batch that changes a document, so the change and its mark commit
// together, at the same position, on every node. An Index follows those
// marks in position order and brings its two indexes up to date from the
// projection itself (through a Source), never from the operation.
//
// Keys. An Index keeps two kinds of rows in the node's store, outside the
// reserved space the state package keeps for itself:
//
//	"\x01search/mark/" KIND "\x00" POS(8 bytes, big-endian) ID -> ""
//	"\x01search/vec/"  KIND "\x00" ID -> vector row (see vectors.go)
//
// A mark says document ID of KIND changed at log position POS. Marks are
// written by projectors (Touch), so a projection rebuilt from the log has
// them all again. They are deleted, by the Index, once the keyword index
// holds their position durably. Vector rows are computed by a provider, not
// decided by the log, so they are the node's own (state.Node.Keep); a
// rebuilt projection has none and they are computed again.
//
// Consistency after a crash. The keyword index records the position it
// reflects inside bleve, set in the same bleve batch as the documents it
// indexed: bleve writes a batch's documents and its internal values to
// disk in one snapshot, so what it holds after a crash is a position and
// exactly the documents indexed through it. A batch is searchable as soon
// as bleve has taken it, and on disk a little later; its persisted
// callback is what moves the durable position, and only marks at or below
// that position are pruned. On open the Index resumes from the position
// bleve durably holds, and every mark after it is still in pebble. A
// missing or unreadable index directory is rebuilt from every document
// the projection holds (Options.IDs), into a fresh directory that replaces
// the old one only once complete. Vectors are brought back in step on
// every open by a sweep that compares each document's text digest with
// its vector row.
//
// Ownership and concurrency. Open starts two goroutines, the keyword
// indexer and the embedder, and Close stops both and closes the bleve
// index (whose own goroutines, the persister that prunes marks among
// them, end with it); Close is safe to call twice. Search and WaitFor may be called from
// any number of goroutines. The indexer is the only writer of the bleve
// index and of marks' deletion; the embedder is the only writer of vector
// rows. Embedding runs behind keyword indexing, so a provider that is slow
// or down never holds up the keyword index, and a search never fails
// because of it: the answer says what it could not do.
package search
