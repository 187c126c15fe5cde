package knowledge

import (
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crewlet/hub/servers/state"
)

// Key layout of the knowledge base in the node's projection.
const (
	kPage       = "kb/page/"   // + page id -> page
	kTitle      = "kb/title/"  // + CONTAINER/lower-cased title -> page id (titles are addresses)
	kChild      = "kb/child/"  // + CONTAINER/parent id or "-"/page id (a container's tree)
	kLinkedFrom = "kb/linked/" // + target id/source id (what "Linked from" reads)
	kWake       = "kb/wake/"   // + pos(16 hex)/n(4) -> a watcher to tell
	kTurnNote   = "kb/tc/"     // + page id/turn key -> comment id
)

// titleKey is where a container records which page a title addresses.
// Titles are compared case-insensitively: two pages whose titles differ
// only in case would be one address to a reader.
func titleKey(container, title string) string {
	return kTitle + container + "/" + strings.ToLower(strings.TrimSpace(title))
}

// childKey files a page under its parent ("-" for the container's top).
func childKey(container, parent, id string) string {
	if parent == "" {
		parent = "-"
	}
	return kChild + container + "/" + parent + "/" + id
}

// readPage reads a page by id; nil when there is none.
func readPage(r pebble.Reader, id string) (*page, error) {
	var p page
	found, err := state.GetJSON(r, kPage+strings.TrimSpace(id), &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}

// pageByTitle reads the page a title addresses in a container.
func pageByTitle(r pebble.Reader, container, title string) (*page, error) {
	var id string
	found, err := state.GetJSON(r, titleKey(container, title), &id)
	if err != nil || !found {
		return nil, err
	}
	return readPage(r, id)
}

// ids lists the last path element of every key under prefix, in order.
func ids(r pebble.Reader, prefix string) ([]string, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: state.Upper(prefix)})
	if err != nil {
		return nil, err
	}
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, strings.TrimPrefix(string(it.Key()), prefix))
	}
	return out, it.Close()
}
