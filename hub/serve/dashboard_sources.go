package serve

import (
	"context"

	"github.com/crewlet/hub/artifacts-mcp"
	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
)

// engineSources is the engine's catalogue of dashboard sources (ART-1):
// what this node holds that a dashboard's engine dataset may read — the
// company's seats always, the work board where the company runs the
// native tracker, the pages where it runs the native knowledge base. It is
// read from the revision in force on every call, as the servers it mirrors
// are, and holds no row: a board reads a source as its own viewer.
type engineSources struct {
	company   func() *config.Company
	directory func() *authority.Directory
}

// everySeat is who reads a source the whole company reads.
const everySeat = "every seat"

var (
	seatsSource = artifacts.Source{Name: "seats",
		Description: "The company's seats: people and agents, with the unit each sits in.",
		Columns: []artifacts.SourceColumn{{Name: "handle", Type: "string"}, {Name: "name", Type: "string"},
			{Name: "kind", Type: "string"}, {Name: "unit", Type: "string"}},
		ReadableBy: everySeat, Refresh: "on view"}
	workItemsSource = artifacts.Source{Name: "work_items",
		Description: "The work board's items, narrowed by project, status or assignee.",
		Parameters: []artifacts.SourceParam{{Name: "project", Type: "string"}, {Name: "status", Type: "string"},
			{Name: "assignee", Type: "string"}},
		Columns: []artifacts.SourceColumn{{Name: "key", Type: "string"}, {Name: "title", Type: "string"},
			{Name: "status", Type: "string"}, {Name: "assignee", Type: "string"}, {Name: "priority", Type: "string"},
			{Name: "project", Type: "string"}, {Name: "updated_at", Type: "time"}},
		ReadableBy: everySeat, Refresh: "on view"}
	pagesSource = artifacts.Source{Name: "knowledge_pages",
		Description: "The knowledge base's published pages, narrowed by container.",
		Parameters:  []artifacts.SourceParam{{Name: "container", Type: "string"}},
		Columns: []artifacts.SourceColumn{{Name: "id", Type: "string"}, {Name: "title", Type: "string"},
			{Name: "container", Type: "string"}, {Name: "updated_at", Type: "time"}},
		ReadableBy: everySeat, Refresh: "on view"}
)

// List answers the sources viewer may read: all of them for a seat the
// company knows or an operator credential, none for anybody else.
func (s engineSources) List(_ context.Context, viewer authority.Caller) ([]artifacts.Source, error) {
	out := []artifacts.Source{}
	if viewer.Kind != authority.KindOperator {
		d := s.directory()
		if d == nil {
			return out, nil
		}
		if _, ok := d.Seat(viewer.Seat); !ok {
			return out, nil
		}
	}
	out = append(out, seatsSource)
	c := s.company()
	if c == nil {
		return out, nil
	}
	if c.TrackerBackend() == "native" {
		out = append(out, workItemsSource)
	}
	if c.KnowledgeBackend() == "native" {
		out = append(out, pagesSource)
	}
	return out, nil
}
