package sanitize

import "strings"

// The hub speaks as itself in _meta keys under HubMetaPrefix: a refusal's
// class (crewlet/refusal), a tool's hints, who is calling. A third-party
// server's result is another party's word. Passed on as written, a server
// could answer with the hub's refusal marker and a client could not tell
// that answer from the hub's own refusal (issue 25, defect 6). So every
// _meta key of what a third-party server sends (its result's _meta, each
// content item's and resource's, a notification's, a request's) that reads
// as the hub's is renamed under ForeignMetaPrefix. The server's data is
// kept, under a name that no longer claims to be the hub's; only the hub
// adds crewlet/ keys to what it passes on.
//
// The rename is applied after the key itself is sanitised, so it judges the
// key the client would read.

const (
	// HubMetaPrefix starts every _meta key the hub and its first-party
	// servers speak in.
	HubMetaPrefix = "crewlet/"
	// ForeignMetaPrefix is put before a third-party server's _meta key
	// that would otherwise read as the hub's.
	ForeignMetaPrefix = "upstream/"
)

// ForeignMetaKey is the name a third-party server's _meta key is passed on
// under: "crewlet/refusal" becomes "upstream/crewlet/refusal". A key that
// already reads so ("upstream/crewlet/x", "upstream/upstream/crewlet/x" ...)
// gains one more prefix too, so no two keys a server sends are ever passed
// on under one name: the rename is one to one.
func ForeignMetaKey(key string) string {
	rest := key
	for strings.HasPrefix(rest, ForeignMetaPrefix) {
		rest = rest[len(ForeignMetaPrefix):]
	}
	if strings.HasPrefix(rest, HubMetaPrefix) {
		return ForeignMetaPrefix + key
	}
	return key
}
