package tracker

import (
	"context"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- merge_work_item ----

type mergeIn struct {
	Key  string `json:"key" jsonschema:"the duplicate, which is closed as cancelled"`
	Into string `json:"into" jsonschema:"the item that survives"`
	servers.OpIDArg
}

type mergeOut struct {
	servers.WriteOut
	Survivor   string   `json:"survivor,omitempty"`
	Version    int      `json:"version,omitempty"`
	Reparented []string `json:"reparented,omitempty"`
}

type mergePayload struct {
	Key  string `json:"key"`
	Into string `json:"into"`
}

func (s *srv) mergeWorkItem(ctx context.Context, c authority.Caller, in mergeIn) (mergeOut, error) {
	call, err := s.w.Begin(c, "merge_work_item", &in, false)
	if err != nil {
		return mergeOut{}, err
	}
	wo, res, err := servers.Write[itemResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		dup, surv, err := checkMerge(r, in.Key, in.Into)
		if err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindMerge, Payload: mergePayload{Key: dup.Key, Into: surv.Key}, What: "the merge of " + dup.Key}, nil
	})
	if err != nil {
		return mergeOut{}, err
	}
	out := mergeOut{WriteOut: wo}
	if res != nil {
		out.Survivor, out.Version, out.Reparented = res.Key, res.Version, res.Reparented
	}
	return out, nil
}

// checkMerge reads the two items a merge names and refuses a merge the
// board cannot make.
func checkMerge(r pebble.Reader, key, into string) (dup, surv *item, err error) {
	if dup, err = readItem(r, key); err != nil {
		return nil, nil, err
	}
	if dup == nil {
		return nil, nil, authority.Refuse(authority.NotFound, "No work item has the key %s.", key)
	}
	if surv, err = readItem(r, into); err != nil {
		return nil, nil, err
	}
	switch {
	case surv == nil:
		return nil, nil, authority.Refuse(authority.Invalid, "into names %s, which is no work item.", into)
	case surv.Key == dup.Key:
		return nil, nil, authority.Refuse(authority.Invalid, "into names %s itself; an item cannot be merged into itself.", surv.Key)
	case dup.MergedInto != "":
		return nil, nil, authority.Refuse(authority.Invalid, "%s was already merged into %s.", dup.Key, dup.MergedInto)
	case surv.MergedInto != "":
		return nil, nil, authority.Refuse(authority.Invalid, "into names %s, which was itself merged into %s; merge into %s.", surv.Key, surv.MergedInto, surv.MergedInto)
	}
	return dup, surv, nil
}

func applyMerge(a *applier) (any, error) {
	var pl mergePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	dupOld, surv, err := checkMerge(a.R, pl.Key, pl.Into)
	if err != nil {
		return nil, err
	}
	cat, err := readCatalogue(a.R)
	if err != nil {
		return nil, err
	}
	kids, err := children(a.R, dupOld.Key)
	if err != nil {
		return nil, err
	}
	var moved []string
	for _, k := range kids {
		if k == surv.Key {
			continue
		}
		kOld, err := a.mustItem(k)
		if err != nil {
			return nil, err
		}
		kNew := clone(kOld)
		kNew.Parent = surv.Key
		kNew.Version++
		kNew.UpdatedAt = a.At()
		a.history(kNew, "parent", dupOld.Key+" -> "+surv.Key+" (merge)")
		if err := a.putItem(kOld, kNew); err != nil {
			return nil, err
		}
		moved = append(moved, k)
	}
	dup := clone(dupOld)
	dup.MergedInto = surv.Key
	dup.Links = append(dup.Links, link{Kind: "duplicate_of", Key: surv.Key})
	if c := cat.cancelled(); c != "" && dup.Status != c {
		a.history(dup, "status", dup.Status+" -> "+c+" (merged)")
		dup.Status = c
	}
	a.history(dup, "merged", "into "+surv.Key)
	dup.Version++
	dup.UpdatedAt = a.At()
	if err := a.putItem(dupOld, dup); err != nil {
		return nil, err
	}
	// Re-read the survivor: re-parenting may not touch it, but a child that
	// is the survivor itself was skipped above, and the read keeps this
	// write on the newest row either way.
	survOld, err := a.mustItem(surv.Key)
	if err != nil {
		return nil, err
	}
	sv := clone(survOld)
	sv.Links = append(sv.Links, link{Kind: "duplicated_by", Key: dup.Key})
	a.history(sv, "merged", fmt.Sprintf("absorbed %s (%d subtasks re-parented)", dup.Key, len(moved)))
	sv.Version++
	sv.UpdatedAt = a.At()
	if err := a.putItem(survOld, sv); err != nil {
		return nil, err
	}
	if err := a.activity("merged", dup.Project, dup.Key, fmt.Sprintf("merged %s into %s", dup.Key, sv.Key), nil); err != nil {
		return nil, err
	}
	return itemResult{Key: sv.Key, ID: sv.ID, Version: sv.Version, Reparented: moved, Status: dup.Status}, nil
}

// ---- move_work_item ----

type moveIn struct {
	Key     string `json:"key" jsonschema:"a top-level item; its subtasks move with it"`
	Project string `json:"project" jsonschema:"the project to move it to"`
	servers.OpIDArg
}

type moveOut struct {
	servers.WriteOut
	Key     string            `json:"key,omitempty"`
	Version int               `json:"version,omitempty"`
	Rekeyed map[string]string `json:"rekeyed,omitempty"`
}

type movePayload struct {
	Key string      `json:"key"`
	To  projectDecl `json:"to"`
}

func (s *srv) moveWorkItem(ctx context.Context, c authority.Caller, in moveIn) (moveOut, error) {
	call, err := s.w.Begin(c, "move_work_item", &in, false)
	if err != nil {
		return moveOut{}, err
	}
	wo, res, err := servers.Write[itemResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		it, err := readItem(r, in.Key)
		if err != nil {
			return servers.Intent{}, err
		}
		if it == nil {
			return servers.Intent{}, authority.Refuse(authority.NotFound, "No work item has the key %s.", in.Key)
		}
		from, _, err := s.resolveProject(r, c, it.Project)
		if err != nil {
			return servers.Intent{}, err
		}
		// Moving work out of a project re-routes it, which is the
		// project lead's call.
		if !s.mayLead(c, from) {
			return servers.Intent{}, authority.Refuse(authority.Forbidden, "Moving %s out of %s is %s's lead's decision (%s); ask them.", it.Key, from.Key, from.Key, orNone(s.lead(from)))
		}
		if strings.TrimSpace(in.Project) == "" {
			return servers.Intent{}, authority.Refuse(authority.Invalid, "project is empty; name the project to move it to.")
		}
		to, _, err := s.resolveProject(r, c, in.Project)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := checkMove(it, to.Key); err != nil {
			return servers.Intent{}, err
		}
		return servers.Intent{Kind: kindMove, Payload: movePayload{Key: it.Key, To: to}, What: "the move of " + it.Key}, nil
	})
	if err != nil {
		return moveOut{}, err
	}
	out := moveOut{WriteOut: wo}
	if res != nil {
		out.Key, out.Version, out.Rekeyed = res.Key, res.Version, res.Rekeyed
	}
	return out, nil
}

// checkMove refuses moving a subtask on its own, or into the project the
// item is already in.
func checkMove(it *item, to string) error {
	if it.Parent != "" {
		return authority.Refuse(authority.Invalid, "key: %s is a subtask of %s; move %s and its subtasks go with it.", it.Key, it.Parent, it.Parent)
	}
	if to == it.Project {
		return authority.Refuse(authority.Invalid, "project: %s is already in %s.", it.Key, to)
	}
	return nil
}

func applyMove(a *applier) (any, error) {
	var pl movePayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	top, err := a.mustItem(pl.Key)
	if err != nil {
		return nil, err
	}
	if err := checkMove(top, pl.To.Key); err != nil {
		return nil, err
	}
	dest, err := a.ensureProject(pl.To)
	if err != nil {
		return nil, err
	}
	// Collect the item and its subtasks, depth first, so parents are
	// re-keyed before the children that point at them.
	order := []*item{top}
	for i := 0; i < len(order); i++ {
		kids, err := children(a.R, order[i].Key)
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			c, err := a.mustItem(k)
			if err != nil {
				return nil, err
			}
			order = append(order, c)
		}
	}
	rekeyed := map[string]string{}
	for _, old := range order {
		dest, err = readProject(a.R, dest.Key)
		if err != nil {
			return nil, err
		}
		dest.Next++
		if err := a.putProject(dest); err != nil {
			return nil, err
		}
		nk := itemKey(dest.Key, dest.Next)
		rekeyed[old.Key] = nk
		it := clone(old)
		if err := a.unindex(old); err != nil {
			return nil, err
		}
		if err := a.B.Delete([]byte(kItem+old.Key), nil); err != nil {
			return nil, err
		}
		if err := a.B.Delete([]byte(kSummary+old.Key), nil); err != nil {
			return nil, err
		}
		if err := state.SetJSON(a.B, kAlias+old.Key, nk); err != nil {
			return nil, err
		}
		it.OldKeys = append(it.OldKeys, old.Key)
		it.Key, it.Project, it.Number = nk, dest.Key, dest.Next
		if np, ok := rekeyed[it.Parent]; ok {
			it.Parent = np
		}
		it.Version++
		it.UpdatedAt = a.At()
		a.history(it, "moved", old.Key+" -> "+nk)
		if err := a.putItem(nil, it); err != nil {
			return nil, err
		}
	}
	// Links elsewhere keep naming the old keys; the aliases resolve them.
	if err := a.activity("moved", dest.Key, rekeyed[top.Key], fmt.Sprintf("moved %s and %d subtasks to %s", top.Key, len(order)-1, dest.Key), rekeyed); err != nil {
		return nil, err
	}
	moved, err := a.mustItem(rekeyed[top.Key])
	if err != nil {
		return nil, err
	}
	return itemResult{Key: moved.Key, ID: moved.ID, Version: moved.Version, Project: dest.Key, Rekeyed: rekeyed}, nil
}
