package serve

import (
	"fmt"
	"log/slog"

	"github.com/crewlet/hub/hub/config"
)

// A seat with no model still claims its mailbox, and every wake of it ends
// not_run: a newcomer mentions it and sees nothing happen unless serve says,
// as it starts, which key to set. The runtime says why on each turn; this
// says it before the first one.

// modelless is one agent seat that has no model to run its turns on, and
// where in the company file a model would be given to it.
type modelless struct {
	Seat string
	// RoleKey is the seat's own model key, e.g. units[0].roles[1].model.
	RoleKey string
}

// seatsWithoutModel lists, in the file's order, the agent seats whose turns
// would end not_run: neither their role nor models.default names a model. A
// seat whose model is named but does not resolve (an unset key) is not
// listed: the preflight names that variable.
func seatsWithoutModel(c *config.Company, env config.Lookup) []modelless {
	var out []modelless
	add := func(key string, r config.Role) {
		if r.Kind != "" && r.Kind != "agent" {
			return
		}
		if _, ok, err := c.SeatModel(r.Handle, env); !ok && err == nil {
			out = append(out, modelless{Seat: r.Handle, RoleKey: key + ".model"})
		}
	}
	for i, u := range c.Units {
		for j, r := range u.Roles {
			add(fmt.Sprintf("units[%d].roles[%d]", i, j), r)
		}
	}
	for j, r := range c.Roles {
		add(fmt.Sprintf("roles[%d]", j), r)
	}
	return out
}

// modelNotes are the banner's lines for the seats without a model, one a
// seat, each naming the keys that would give it one. configFile is the
// company file, empty for the embedded company, which has no file to edit
// yet: the note says how to get one.
func modelNotes(seats []modelless, configFile string) []string {
	where := "in " + configFile
	if configFile == "" {
		where = "in a company file (`crewlet config default > company.yaml`, then serve it with --config company.yaml)"
	}
	out := make([]string, 0, len(seats))
	for _, s := range seats {
		out = append(out, fmt.Sprintf("seat @%s has no model, so a mention of it ends not_run: set models.default "+
			"(a model at a provider declared under providers) or %s %s", s.Seat, s.RoleKey, where))
	}
	return out
}

// logModelless logs each seat without a model once, as the node starts.
func logModelless(log *slog.Logger, seats []modelless) {
	for _, s := range seats {
		log.Warn("seat_has_no_model", "seat", s.Seat, "set", "models.default or "+s.RoleKey,
			"effect", "its turns end not_run")
	}
}
