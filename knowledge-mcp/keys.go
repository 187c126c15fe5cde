package knowledge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
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

// upper is the exclusive upper bound of every key starting with prefix.
func upper(prefix string) []byte { return []byte(prefix + "\xff") }

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

func getJSON(r pebble.Reader, key string, v any) (bool, error) {
	b, closer, err := r.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %q: %w", key, err)
	}
	return true, nil
}

func setJSON(b *pebble.Batch, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set([]byte(key), data, nil)
}

// readPage reads a page by id; nil when there is none.
func readPage(r pebble.Reader, id string) (*page, error) {
	var p page
	found, err := getJSON(r, kPage+strings.TrimSpace(id), &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}

// pageByTitle reads the page a title addresses in a container.
func pageByTitle(r pebble.Reader, container, title string) (*page, error) {
	var id string
	found, err := getJSON(r, titleKey(container, title), &id)
	if err != nil || !found {
		return nil, err
	}
	return readPage(r, id)
}

// ids lists the last path element of every key under prefix, in order.
func ids(r pebble.Reader, prefix string) ([]string, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: upper(prefix)})
	if err != nil {
		return nil, err
	}
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, strings.TrimPrefix(string(it.Key()), prefix))
	}
	return out, it.Close()
}
