package artifacts

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- set_artifact_schema ----

type schemaIn struct {
	ID          string       `json:"id" jsonschema:"the artifact's id (art_...)"`
	Collections []collection `json:"collections" jsonschema:"every collection the datastore keeps after the change, with its columns and rules; one left out is dropped with its rows"`
	servers.OpIDArg
}

type schemaOut struct {
	servers.WriteOut
	ID          string   `json:"id,omitempty"`
	URL         string   `json:"url,omitempty"`
	Version     int      `json:"version,omitempty"`
	Collections []string `json:"collections,omitempty"`
}

type schemaPayload struct {
	ID     string `json:"id"`
	Schema schema `json:"schema"`
}

type schemaResult struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
}

// checkSchemaChange is the rule a schema change keeps: well formed, and
// from an agent, tightening only (ART-8). The tool and the projector both
// ask it.
func checkSchemaChange(old, now *schema, agent bool) error {
	if err := now.check(); err != nil {
		return err
	}
	if !agent {
		return nil
	}
	if l := loosenings(old, now); len(l) > 0 {
		return authority.Refuse(authority.Forbidden, "An agent may tighten a datastore's rules and never loosen them, and this change %s; that is a person's to do. Nothing was changed.", strings.Join(l, "; ")).
			WithData("loosens", l)
	}
	return nil
}

func (s *srv) setArtifactSchema(ctx context.Context, c authority.Caller, in schemaIn) (schemaOut, error) {
	call, err := s.w.Begin(c, "set_artifact_schema", &in, true)
	if err != nil {
		return schemaOut{}, err
	}
	wo, res, err := servers.Write[schemaResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		art, err := readArtifact(r, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if _, err := s.decide(c, art, in.ID, authority.VerbSchema); err != nil {
			return servers.Intent{}, err
		}
		if err := trashed(art); err != nil {
			return servers.Intent{}, err
		}
		old, err := readSchema(r, art.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		now := &schema{Collections: in.Collections}
		if now.Collections == nil {
			now.Collections = []collection{}
		}
		if err := checkSchemaChange(old, now, c.Kind == authority.KindAgent); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindSchema, Payload: schemaPayload{ID: art.ID, Schema: *now}, What: "the schema of " + art.ID}, nil
	})
	if err != nil {
		return schemaOut{}, err
	}
	out := schemaOut{WriteOut: wo, ID: in.ID, URL: s.url(in.ID)}
	for _, coll := range in.Collections {
		out.Collections = append(out.Collections, coll.Name)
	}
	if res != nil {
		out.Version = res.Version
		s.enter(ctx, c, in.ID, editing, "schema")
	}
	return out, nil
}

func applySchema(a *applier) (any, error) {
	var pl schemaPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	art, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	old, err := readSchema(a.R, art.ID)
	if err != nil {
		return nil, err
	}
	now := pl.Schema
	if err := checkSchemaChange(old, &now, a.By.Kind == authority.KindAgent); err != nil {
		return nil, err
	}
	now.Version = old.Version + 1
	// A dropped collection goes with its rows; an index dropped goes, and
	// one added is filled from the rows already there.
	for i := range old.Collections {
		o := &old.Collections[i]
		n := now.collection(o.Name)
		if n == nil {
			for _, p := range []string{kRow, kIndex, kChange} {
				prefix := p + art.ID + "/" + o.Name + "/"
				if err := a.B.DeleteRange([]byte(prefix), state.Upper(prefix), nil); err != nil {
					return nil, err
				}
			}
			continue
		}
		for _, col := range o.Columns {
			if col.Indexed {
				if nc := n.column(col.Name); nc == nil || !nc.Indexed {
					p := indexPrefix(art.ID, o.Name, col.Name)
					if err := a.B.DeleteRange([]byte(p), state.Upper(p), nil); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	for i := range now.Collections {
		n := &now.Collections[i]
		var fresh []column
		for _, col := range n.Columns {
			if !col.Indexed {
				continue
			}
			if o := old.collection(n.Name); o != nil {
				if oc := o.column(col.Name); oc != nil && oc.Indexed {
					continue
				}
			}
			fresh = append(fresh, col)
		}
		if len(fresh) == 0 {
			continue
		}
		only := &collection{Name: n.Name, Columns: fresh}
		if err := each(a.R, kRow+art.ID+"/"+n.Name+"/", "", func(k, v []byte) (bool, error) {
			var rw row
			if err := state.DecodeJSON(k, v, &rw); err != nil {
				return false, err
			}
			for _, k := range indexKeys(art.ID, only, &rw) {
				if err := a.B.Set([]byte(k), nil, nil); err != nil {
					return false, err
				}
			}
			return true, nil
		}); err != nil {
			return nil, err
		}
	}
	if err := state.SetJSON(a.B, kSchema+art.ID, now); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(now.Collections))
	for _, c := range now.Collections {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	if err := a.history(art.ID, fmt.Sprintf("set the datastore's schema (version %d): %s", now.Version, orNone(names)), 0); err != nil {
		return nil, err
	}
	return schemaResult{ID: art.ID, Version: now.Version}, nil
}
