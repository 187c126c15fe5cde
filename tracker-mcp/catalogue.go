package tracker

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

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

// openFilter is the status filter that asks for every live item: those in
// a status whose category is open or started. It is no status's key (the
// catalogue refuses one), so it cannot mean anything else.
const openFilter = "open"

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

func readCatalogue(r pebble.Reader) (catalogue, error) {
	var c catalogue
	found, err := state.GetJSON(r, kCatalogue, &c)
	if err != nil || !found {
		return defaultCatalogue(), err
	}
	return c, nil
}

func (c catalogue) status(key string) (statusDef, bool) {
	for _, s := range c.Statuses {
		if s.Key == key {
			return s, true
		}
	}
	return statusDef{}, false
}

// live reports whether items in status are live work (open or started).
func (c catalogue) live(status string) bool {
	s, ok := c.status(status)
	return ok && (s.Category == "open" || s.Category == "started")
}

// checkStatus refuses a status the catalogue does not define.
func (c catalogue) checkStatus(status string) error {
	if _, ok := c.status(status); !ok {
		return authority.Refuse(authority.Invalid, "status %q is not in the work catalogue (%s).", status, strings.Join(c.statusKeys(), ", "))
	}
	return nil
}

// checkPriority refuses a priority the catalogue does not define; no
// priority at all is allowed.
func (c catalogue) checkPriority(p string) error {
	if p != "" && !slices.Contains(c.Priorities, p) {
		return authority.Refuse(authority.Invalid, "priority %q is not in the work catalogue (%s).", p, strings.Join(c.Priorities, ", "))
	}
	return nil
}

// firstOpen is the status new items start in: todo where the catalogue has
// it, else its first open status.
func (c catalogue) firstOpen() string {
	if k := c.pick("todo", "open"); k != "" {
		return k
	}
	return c.Statuses[0].Key
}

// cancelled is the status a merged duplicate closes in; "" if none.
func (c catalogue) cancelled() string { return c.pick("cancelled", "cancelled") }

// pick is key where the catalogue has it, else its first status of
// category, else "".
func (c catalogue) pick(key, category string) string {
	if _, ok := c.status(key); ok {
		return key
	}
	for _, s := range c.Statuses {
		if s.Category == category {
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

var keyWordRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// checkCatalogue refuses a catalogue a board cannot run on.
func checkCatalogue(c catalogue) error {
	if len(c.Statuses) > maxStatuses || len(c.Priorities) > maxPriorities {
		return authority.Refuse(authority.Invalid, "the catalogue has %d statuses and %d priorities; at most %d and %d.", len(c.Statuses), len(c.Priorities), maxStatuses, maxPriorities)
	}
	seen := map[string]bool{}
	cats := map[string]bool{}
	for _, st := range c.Statuses {
		if !keyWordRE.MatchString(st.Key) {
			return authority.Refuse(authority.Invalid, "statuses holds key %q; a status key is snake_case, up to 32 characters.", st.Key)
		}
		if st.Key == openFilter {
			return authority.Refuse(authority.Invalid, "statuses holds key %q, which list_work_items reserves for every live item; name the status otherwise (todo, new, ...).", st.Key)
		}
		if err := checkSize("the name of status "+st.Key, st.Name, maxStatusName); err != nil {
			return err
		}
		if seen[st.Key] {
			return authority.Refuse(authority.Invalid, "statuses names %q twice.", st.Key)
		}
		seen[st.Key] = true
		switch st.Category {
		case "open", "started", "done", "cancelled":
		default:
			return authority.Refuse(authority.Invalid, "status %q has category %q; a category is open, started, done or cancelled.", st.Key, st.Category)
		}
		cats[st.Category] = true
	}
	if !cats["open"] || !cats["done"] {
		return authority.Refuse(authority.Invalid, "statuses needs at least one open status (where new items start) and one done status.")
	}
	if len(c.Priorities) == 0 {
		return authority.Refuse(authority.Invalid, "priorities is empty; name at least one.")
	}
	for _, p := range c.Priorities {
		if !keyWordRE.MatchString(p) {
			return authority.Refuse(authority.Invalid, "priorities holds %q; a priority is snake_case, up to 32 characters.", p)
		}
	}
	return nil
}

// ---- get_work_catalogue / write_work_catalogue ----

type getCatalogueIn struct{}

func (s *srv) getWorkCatalogue(_ context.Context, _ authority.Caller, _ getCatalogueIn) (catalogue, error) {
	var out catalogue
	err := s.w.View(func(r pebble.Reader) error {
		var err error
		out, err = readCatalogue(r)
		return err
	})
	return out, err
}

type writeCatalogueIn struct {
	Statuses   []statusDef `json:"statuses" jsonschema:"every status, in board order; at least one open and one done"`
	Priorities []string    `json:"priorities" jsonschema:"every priority, lowest first"`
	servers.OpIDArg
}

type writeCatalogueOut struct {
	servers.WriteOut
	Version int `json:"version,omitempty"`
}

type cataloguePayload struct {
	Catalogue catalogue `json:"catalogue"`
}

// writeWorkCatalogue is operator-only (TRK-6): the catalogue shapes every
// project's board, so it is a person's decision — an administrator's (their
// seat, or an administrator's credential) or a unit lead's.
func (s *srv) writeWorkCatalogue(ctx context.Context, c authority.Caller, in writeCatalogueIn) (writeCatalogueOut, error) {
	switch {
	case c.Kind == authority.KindAgent:
		return writeCatalogueOut{}, authority.Refuse(authority.Forbidden, "The work catalogue is written by people, not seats; ask an administrator or a unit lead.")
	case !authority.IsAdmin(c, s.dir()) && !s.leadsAUnit(c):
		return writeCatalogueOut{}, authority.Refuse(authority.Forbidden, "Only an administrator or a unit lead may write the work catalogue; this credential is neither.")
	}
	call, err := s.w.Begin(c, "write_work_catalogue", &in, true)
	if err != nil {
		return writeCatalogueOut{}, err
	}
	wo, res, err := servers.Write[struct{ Version int }](ctx, s.w, call, func(pebble.Reader) (servers.Intent, error) {
		cat := catalogue{Statuses: in.Statuses, Priorities: dedupe(in.Priorities)}
		if err := checkCatalogue(cat); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindCatalogue, Payload: cataloguePayload{Catalogue: cat}, What: "the catalogue write"}, nil
	})
	if err != nil {
		return writeCatalogueOut{}, err
	}
	out := writeCatalogueOut{WriteOut: wo}
	if res != nil {
		out.Version = res.Version
	}
	return out, nil
}

func applyCatalogue(a *applier) (any, error) {
	var pl cataloguePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	cur, err := readCatalogue(a.R)
	if err != nil {
		return nil, err
	}
	// A status still carried by items cannot leave the catalogue: those
	// items would hold a status nothing defines.
	it, err := a.R.NewIter(&pebble.IterOptions{LowerBound: []byte(kProject), UpperBound: state.Upper(kProject)})
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for it.First(); it.Valid(); it.Next() {
		var p project
		if err := state.DecodeJSON(it.Key(), it.Value(), &p); err != nil {
			it.Close()
			return nil, err
		}
		for s, n := range p.Counts {
			if n > 0 {
				inUse[s] = true
			}
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	for s := range inUse {
		if _, ok := pl.Catalogue.status(s); !ok {
			return nil, authority.Refuse(authority.Invalid, "statuses leaves out %q, which work items still carry; move them to another status first.", s)
		}
	}
	pl.Catalogue.Version = cur.Version + 1
	if err := state.SetJSON(a.B, kCatalogue, pl.Catalogue); err != nil {
		return nil, err
	}
	if err := a.activity("catalogue_written", "", "", fmt.Sprintf("wrote the work catalogue (%d statuses, %d priorities)", len(pl.Catalogue.Statuses), len(pl.Catalogue.Priorities)), nil); err != nil {
		return nil, err
	}
	return map[string]int{"version": pl.Catalogue.Version}, nil
}
