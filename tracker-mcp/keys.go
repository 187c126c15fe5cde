package tracker

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/crewlet/hub/servers/state"
)

// Key layout. Numbers inside index keys are zero-padded so byte order is
// number order, which lets a list walk an index newest first without
// sorting.
const (
	kProject   = "trk/proj/"  // + KEY -> project
	kItem      = "trk/item/"  // + KEY -> item
	kSummary   = "trk/sum/"   // + KEY -> summary (what a list shows)
	kAlias     = "trk/alias/" // + old KEY -> current KEY
	kID        = "trk/id/"    // + item id -> current KEY
	kIxProject = "trk/ix/p/"  // + PROJ/num
	kIxStatus  = "trk/ix/ps/" // + PROJ/status/num
	kIxAssign  = "trk/ix/a/"  // + assignee/PROJ/num
	kIxChild   = "trk/ix/c/"  // + parent KEY/child KEY
	kIxLabel   = "trk/ix/l/"  // + label/PROJ/num
	kIxPrio    = "trk/ix/r/"  // + priority/PROJ/num
	kIxStatAll = "trk/ix/s/"  // + status/PROJ/num
	kCatalogue = "trk/catalogue"
	kActivity  = "trk/act/"  // + pos(16 hex)/n(4) -> activity row
	kTurnNote  = "trk/tc/"   // + item id/turn key -> comment id
	kWake      = "trk/wake/" // + pos(16 hex)/n(4) -> wake event
	kFile      = "trk/file/" // + PROJ/path -> file
	kView      = "trk/view/" // + lower(name) -> saved view
	kInbox     = "trk/in/"   // + seat/pos(16 hex).n(4) -> inbox entry
	kInboxMeta = "trk/inm/"  // + seat -> inbox counts
	kPin       = "trk/pin/"  // + seat/item id -> pin
	kQueue     = "trk/q/"    // + seat -> the seat's queue order
	// trk/tok/, trk/dl/ and trk/stats held a keyword index of this
	// package's own; search now lives in package search, and the prefixes
	// are not to be reused (a projection built before keeps those rows).
)

var keyRE = regexp.MustCompile(`^([A-Z][A-Z0-9]*)-([0-9]+)$`)

// parseKey reads an item key (case-insensitive) into its project and number.
func parseKey(s string) (string, int, bool) {
	m := keyRE.FindStringSubmatch(strings.ToUpper(strings.TrimSpace(s)))
	if m == nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return m[1], n, true
}

func itemKey(project string, n int) string { return project + "-" + strconv.Itoa(n) }
func pad(n int) string                     { return fmt.Sprintf("%010d", n) }

// indexKeys are the list index rows an item is filed under, and the one
// place they are spelled: putItem writes them, unindex deletes them, and a
// list walks them.
func (it *item) indexKeys() []string {
	num := pad(it.Number)
	keys := []string{
		kIxProject + it.Project + "/" + num,
		kIxStatus + it.Project + "/" + it.Status + "/" + num,
		kIxAssign + it.Assignee + "/" + it.Project + "/" + num,
		kIxPrio + it.Priority + "/" + it.Project + "/" + num,
		kIxStatAll + it.Status + "/" + it.Project + "/" + num,
	}
	if it.Parent != "" {
		keys = append(keys, kIxChild+it.Parent+"/"+it.Key)
	}
	for _, l := range it.Labels {
		keys = append(keys, kIxLabel+l+"/"+it.Project+"/"+num)
	}
	return keys
}

// indexedSummary is the summary of the item a list index row files: the
// row's own value, or, for a row written before index rows carried one,
// the summary's row. found is false when the item has no summary. A
// summaryRow is decoded with the title's writers the row holds.
func indexedSummary[S summary | summaryRow](r pebble.Reader, row []byte, proj string, n int, sm *S) (found bool, err error) {
	key := kSummary + itemKey(proj, n)
	if len(row) > 0 {
		err := state.DecodeJSON(key, row, sm)
		return err == nil, err
	}
	return state.GetJSON(r, key, sm)
}

// eachJSON decodes every row under prefix, in key order, into fn.
func eachJSON[T any](r pebble.Reader, prefix string, fn func(T)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: state.Upper(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		var v T
		if err := state.DecodeJSON(it.Key(), it.Value(), &v); err != nil {
			it.Close()
			return err
		}
		fn(v)
	}
	return it.Close()
}

// resolveKey follows aliases left by moves, so an old key still names the
// item. It answers the current key, or "" when nothing has that key.
func resolveKey(r pebble.Reader, key string) (string, error) {
	key = strings.ToUpper(strings.TrimSpace(key))
	for range 16 { // a moved item moved again chains; bounded against cycles
		ok, err := state.Exists(r, kItem+key)
		if err != nil || ok {
			return key, err
		}
		var next string
		found, err := state.GetJSON(r, kAlias+key, &next)
		if err != nil || !found {
			return "", err
		}
		key = next
	}
	return "", nil
}

// readItem reads an item by key (an old key from before a move works) or by
// id; nil when nothing has it.
func readItem(r pebble.Reader, keyOrID string) (*item, error) {
	k := strings.TrimSpace(keyOrID)
	if strings.HasPrefix(k, "wi_") {
		var cur string
		found, err := state.GetJSON(r, kID+k, &cur)
		if err != nil || !found {
			return nil, err
		}
		k = cur
	}
	cur, err := resolveKey(r, k)
	if err != nil || cur == "" {
		return nil, err
	}
	var it item
	found, err := state.GetJSON(r, kItem+cur, &it)
	if err != nil || !found {
		return nil, err
	}
	return &it, nil
}

func readProject(r pebble.Reader, key string) (*project, error) {
	var p project
	found, err := state.GetJSON(r, kProject+key, &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}
