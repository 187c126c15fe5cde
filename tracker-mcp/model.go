package tracker

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
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
	kTurn      = "trk/turn/" // + turn key -> first op time of the turn
	kTurnNote  = "trk/tc/"   // + item id/turn key -> comment id
	kWake      = "trk/wake/" // + pos(16 hex)/n(4) -> wake event
	kFile      = "trk/file/" // + PROJ/path -> file
	kPosting   = "trk/tok/"  // + term/\x00/KEY -> term frequency
	kDocLen    = "trk/dl/"   // + KEY -> indexed length
	kStats     = "trk/stats" // documents and total length
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

func itemKey(project string, n int) string { return fmt.Sprintf("%s-%d", project, n) }
func pad(n int) string                     { return fmt.Sprintf("%010d", n) }

// project is one project as the projection holds it.
type project struct {
	Key             string         `json:"key"`
	Name            string         `json:"name"`
	Unit            string         `json:"unit,omitempty"`
	Lead            string         `json:"lead,omitempty"`
	DefaultAssignee string         `json:"default_assignee,omitempty"`
	Labels          []string       `json:"labels,omitempty"`
	Next            int            `json:"next"` // highest number handed out
	Version         int            `json:"version"`
	CreatedAt       time.Time      `json:"created_at"`
	Counts          map[string]int `json:"counts,omitempty"` // items per status
}

// projectDecl is what a write carries to declare a project that has no row
// yet: projects come from the directory's units, and the first write that
// needs one records it, so every node creates it the same way.
type projectDecl struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	Lead string `json:"lead,omitempty"`
}

type link struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
}

type checkItem struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
	Done bool   `json:"done"`
}

type question struct {
	To       string   `json:"to"`
	Text     string   `json:"text"`
	Options  []string `json:"options,omitempty"`
	Answered bool     `json:"answered,omitempty"`
	Choice   string   `json:"choice,omitempty"`
	AnswerBy string   `json:"answer_by,omitempty"`
}

type comment struct {
	ID       int       `json:"id"`
	By       writer    `json:"by"`
	At       time.Time `json:"at"`
	Body     string    `json:"body"`
	Mentions []string  `json:"mentions,omitempty"`
	Ask      *question `json:"ask,omitempty"`
	Answers  int       `json:"answers,omitempty"` // the comment whose question this answers
	Choice   string    `json:"choice,omitempty"`
}

// historyRow describes a change; it never quotes text (a row is kept forever
// on every node), it says what moved and by how much.
type historyRow struct {
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Field  string    `json:"field"`
	Change string    `json:"change"`
}

type item struct {
	ID            string       `json:"id"`
	Key           string       `json:"key"`
	Project       string       `json:"project"`
	Number        int          `json:"number"`
	Title         string       `json:"title"`
	Description   string       `json:"description,omitempty"`
	DescribedBy   []writer     `json:"described_by,omitempty"`
	Status        string       `json:"status"`
	Assignee      string       `json:"assignee,omitempty"`
	Triage        bool         `json:"triage,omitempty"`
	Priority      string       `json:"priority,omitempty"`
	Labels        []string     `json:"labels,omitempty"`
	Parent        string       `json:"parent,omitempty"`
	Links         []link       `json:"links,omitempty"`
	Checklist     []checkItem  `json:"checklist,omitempty"`
	Question      *question    `json:"question,omitempty"`
	Thread        []comment    `json:"thread,omitempty"`
	History       []historyRow `json:"history,omitempty"`
	Reassignments int          `json:"reassignments,omitempty"`
	OldKeys       []string     `json:"old_keys,omitempty"`
	MergedInto    string       `json:"merged_into,omitempty"`
	Version       int          `json:"version"`
	CreatedBy     writer       `json:"created_by"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

// summary is what lists show: small, so a list of many items reads little.
type summary struct {
	Key       string    `json:"key"`
	ID        string    `json:"id"`
	Project   string    `json:"project"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	Assignee  string    `json:"assignee,omitempty"`
	Triage    bool      `json:"triage,omitempty"`
	Priority  string    `json:"priority,omitempty"`
	Labels    []string  `json:"labels,omitempty"`
	Parent    string    `json:"parent,omitempty"`
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (it *item) summary() summary {
	return summary{Key: it.Key, ID: it.ID, Project: it.Project, Title: it.Title, Status: it.Status,
		Assignee: it.Assignee, Triage: it.Triage, Priority: it.Priority, Labels: it.Labels,
		Parent: it.Parent, Version: it.Version, UpdatedAt: it.UpdatedAt}
}

// statusDef is one status of the work catalogue. Category decides what the
// status means to the engine: open and started items are live work, done and
// cancelled ones are closed.
type statusDef struct {
	Key      string `json:"key" jsonschema:"the status's key, snake_case, as items carry it"`
	Name     string `json:"name" jsonschema:"how the status is shown"`
	Category string `json:"category" jsonschema:"open, started, done or cancelled"`
}

type catalogue struct {
	Statuses   []statusDef `json:"statuses"`
	Priorities []string    `json:"priorities"`
	Version    int         `json:"version"`
}

func defaultCatalogue() catalogue {
	return catalogue{
		Statuses: []statusDef{
			{"todo", "To do", "open"},
			{"in_progress", "In progress", "started"},
			{"in_review", "In review", "started"},
			{"done", "Done", "done"},
			{"cancelled", "Cancelled", "cancelled"},
		},
		Priorities: []string{"none", "low", "medium", "high", "urgent"},
	}
}

func (c catalogue) status(key string) (statusDef, bool) {
	for _, s := range c.Statuses {
		if s.Key == key {
			return s, true
		}
	}
	return statusDef{}, false
}

// firstOpen is the status new items start in: todo where the catalogue has
// it, else its first open status.
func (c catalogue) firstOpen() string {
	if _, ok := c.status("todo"); ok {
		return "todo"
	}
	for _, s := range c.Statuses {
		if s.Category == "open" {
			return s.Key
		}
	}
	return c.Statuses[0].Key
}

func (c catalogue) cancelled() string {
	if _, ok := c.status("cancelled"); ok {
		return "cancelled"
	}
	for _, s := range c.Statuses {
		if s.Category == "cancelled" {
			return s.Key
		}
	}
	return ""
}

func (c catalogue) statusKeys() []string {
	out := make([]string, 0, len(c.Statuses))
	for _, s := range c.Statuses {
		out = append(out, s.Key)
	}
	return out
}

// file is one project file.
type file struct {
	Project string    `json:"project"`
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Content []byte    `json:"content"`
	Version int       `json:"version"`
	Writers []writer  `json:"writers"`
	Updated time.Time `json:"updated_at"`
}

// activity is one row of the feed.
type activity struct {
	ID      string          `json:"id"`
	At      time.Time       `json:"at"`
	Actor   writer          `json:"actor"`
	Action  string          `json:"action"`
	Project string          `json:"project,omitempty"`
	Item    string          `json:"item,omitempty"`
	Summary string          `json:"summary"`
	Detail  json.RawMessage `json:"detail,omitempty"` // the change record, texts included
}

// wake is a seat named in a comment, to be woken by whoever runs turns.
type wake struct {
	Seat    string    `json:"seat"`
	Item    string    `json:"item"`
	Comment int       `json:"comment"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// getJSON reads key into v; found is false when the key is absent.
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

func exists(r pebble.Reader, key string) (bool, error) {
	_, closer, err := r.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

func setJSON(b *pebble.Batch, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set([]byte(key), data, nil)
}

func readCatalogue(r pebble.Reader) (catalogue, error) {
	var c catalogue
	found, err := getJSON(r, kCatalogue, &c)
	if err != nil || !found {
		return defaultCatalogue(), err
	}
	return c, nil
}

// resolveKey follows aliases left by moves, so an old key still names the
// item. It answers the current key, or "" when nothing has that key.
func resolveKey(r pebble.Reader, key string) (string, error) {
	key = strings.ToUpper(strings.TrimSpace(key))
	for range 16 { // a moved item moved again chains; bounded against cycles
		ok, err := exists(r, kItem+key)
		if err != nil || ok {
			return key, err
		}
		var next string
		found, err := getJSON(r, kAlias+key, &next)
		if err != nil || !found {
			return "", err
		}
		key = next
	}
	return "", nil
}

func readItem(r pebble.Reader, keyOrID string) (*item, error) {
	k := strings.TrimSpace(keyOrID)
	if strings.HasPrefix(k, "wi_") {
		var cur string
		found, err := getJSON(r, kID+k, &cur)
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
	found, err := getJSON(r, kItem+cur, &it)
	if err != nil || !found {
		return nil, err
	}
	return &it, nil
}

func readProject(r pebble.Reader, key string) (*project, error) {
	var p project
	found, err := getJSON(r, kProject+key, &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}

// describeSet says what joined and left a set, never both sides whole.
func describeSet(before, after []string) string {
	var parts []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			parts = append(parts, "+"+a)
		}
	}
	for _, b := range before {
		if !slices.Contains(after, b) {
			parts = append(parts, "-"+b)
		}
	}
	return strings.Join(parts, " ")
}

func describeText(before, after string) string {
	switch {
	case before == "":
		return fmt.Sprintf("set (%d bytes)", len(after))
	case after == "":
		return fmt.Sprintf("cleared (was %d bytes)", len(before))
	default:
		return fmt.Sprintf("rewritten (%d -> %d bytes)", len(before), len(after))
	}
}

func orNone(s string) string {
	if s == "" {
		return "nobody"
	}
	return s
}
