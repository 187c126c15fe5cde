package artifacts

import (
	"context"

	"github.com/crewlet/hub/authority"
)

// The engine's dashboard sources are datasets a dashboard's engine reads
// (run as each board's viewer), not rows the store keeps. The node that
// mounts the store says which it has (Deps.Sources, ART-1);
// list_dashboard_sources is registered only where it is given some
// (CAT-3), rather than always answering an empty list that would look
// like a company with no data.

// Sources is the engine's catalogue of dashboard sources.
type Sources interface {
	// List answers the sources viewer may read.
	List(ctx context.Context, viewer authority.Caller) ([]Source, error)
}

// Source is one dataset a dashboard may read.
type Source struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  []SourceParam  `json:"parameters,omitempty"`
	Columns     []SourceColumn `json:"columns"`
	// ReadableBy says who may read it ("every seat", "unit:core").
	ReadableBy string `json:"readable_by"`
	// Refresh says how it refreshes ("on view", "every 5 minutes").
	Refresh string `json:"refresh"`
}

// SourceParam is one parameter a source takes.
type SourceParam struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required,omitempty"`
}

// SourceColumn is one column a source answers.
type SourceColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type sourcesIn struct{}

type sourcesOut struct {
	Sources []Source `json:"sources"`
	Note    string   `json:"note"`
}

// listSources answers the sources the caller may read and, in a turn, the
// ones whom it acts for may read too: a board shows each viewer only what
// they could read themselves.
func (s *srv) listSources(ctx context.Context, c authority.Caller, _ sourcesIn) (sourcesOut, error) {
	if err := s.checkRequester(c); err != nil {
		return sourcesOut{}, err
	}
	mine, err := s.d.Sources.List(ctx, c)
	if err != nil {
		return sourcesOut{}, err
	}
	if rel, req := s.requesterOf(c); rel == authority.RequesterKnown {
		theirs, err := s.d.Sources.List(ctx, authority.Caller{Seat: req, Kind: authority.KindHuman, Requester: req})
		if err != nil {
			return sourcesOut{}, err
		}
		keep := map[string]bool{}
		for _, src := range theirs {
			keep[src.Name] = true
		}
		both := mine[:0:0]
		for _, src := range mine {
			if keep[src.Name] {
				both = append(both, src)
			}
		}
		mine = both
	}
	if mine == nil {
		mine = []Source{}
	}
	return sourcesOut{Sources: mine, Note: "A source holds no rows here: a dashboard's engine dataset reads it when the board is viewed, as that board's viewer."}, nil
}
