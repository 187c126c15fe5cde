package artifacts

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers/state"
)

// The trash, restoring from it and purging are a person's decisions, made
// in the dashboard: no tool offers them (ART-4). They are here, as Store
// methods, because the store's rules depend on them (a trashed artifact
// serves nothing and takes no write), because a purge is what really
// deletes an artifact's bytes, and for the dashboard to call.

// Store is the artifact store's entry points beside its tools: a person's
// trash, restore and purge, the room of an artifact, and the file route
// the hub serves each artifact's current version at.
type Store struct{ s *srv }

// NewStore is the store over the same node and directory the tools use.
func NewStore(d Deps) *Store { return &Store{s: newSrv(d)} }

type trashPayload struct {
	ID      string `json:"id"`
	Restore bool   `json:"restore,omitempty"`
}

// Trash puts an artifact in the trash: it serves no content and takes no
// write until a person restores it.
func (st *Store) Trash(ctx context.Context, c authority.Caller, id string) error {
	return st.personal(ctx, c, id, "trash_artifact", kindTrash, trashPayload{ID: id}, false)
}

// Restore takes an artifact out of the trash.
func (st *Store) Restore(ctx context.Context, c authority.Caller, id string) error {
	return st.personal(ctx, c, id, "restore_artifact", kindTrash, trashPayload{ID: id, Restore: true}, true)
}

// Purge deletes an artifact in the trash for good: every version, asset,
// row and history line, and every byte of its files, erased from the blob
// store before Purge returns.
func (st *Store) Purge(ctx context.Context, c authority.Caller, id string) error {
	if err := st.personal(ctx, c, id, "purge_artifact", kindPurge, trashPayload{ID: id}, true); err != nil {
		return err
	}
	return st.s.w.Node().EraseFreed(ctx)
}

// personal writes a person's decision about an artifact: its owner, if a
// person, or an administrator.
func (st *Store) personal(ctx context.Context, c authority.Caller, id, tool, kind string, pl trashPayload, needTrashed bool) error {
	s := st.s
	if s.w.Node() == nil {
		return authority.Refuse(authority.Unavailable, "The artifact store has no state node here.")
	}
	var art *artifact
	if err := s.w.View(func(r pebble.Reader) error {
		var err error
		art, err = readArtifact(r, id)
		return err
	}); err != nil {
		return err
	}
	if art == nil || (s.roleOf(art, c.Seat) == authority.RoleNone && !authority.IsAdmin(c, s.dir())) {
		return authority.ArtifactMissing(id)
	}
	owner := c.Kind != authority.KindAgent && strings.EqualFold(art.Owner.Seat, c.Seat)
	if c.Kind == authority.KindAgent || (!owner && !authority.IsAdmin(c, s.dir())) {
		return authority.Refuse(authority.Forbidden, "Trash, restore and purge are a person's: %s's owner (if a person) or an administrator, in the dashboard.", id)
	}
	if needTrashed && !art.Trashed {
		return authority.Refuse(authority.Invalid, "%s is not in the trash.", id)
	}
	args, _ := json.Marshal(pl)
	_, err := s.w.Node().Write(ctx, state.Op{Tool: tool, Args: args, Kind: kind, Payload: args, Caller: c, At: s.w.Now().UTC()})
	return err
}

func applyTrash(a *applier) (any, error) {
	var pl trashPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.must(pl.ID)
	if err != nil {
		return nil, err
	}
	if old.Trashed == !pl.Restore {
		return artifactResult{ID: old.ID}, nil
	}
	art := old.clone()
	art.Trashed, art.TrashedBy, art.UpdatedAt = !pl.Restore, a.By.Seat, a.At()
	what := "put in the trash"
	if pl.Restore {
		art.TrashedBy = ""
		what = "restored from the trash"
	}
	if err := a.put(art); err != nil {
		return nil, err
	}
	if err := a.history(art.ID, what, 0); err != nil {
		return nil, err
	}
	return artifactResult{ID: art.ID}, nil
}

func applyPurge(a *applier) (any, error) {
	var pl trashPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	art, err := a.must(pl.ID)
	if err != nil {
		return nil, err
	}
	if !art.Trashed {
		return nil, authority.Refuse(authority.Invalid, "%s is not in the trash; only what is in the trash is purged.", art.ID)
	}
	// Every blob it holds is freed, so the node erases the bytes.
	var blobs []string
	if err := each(a.R, kBlob+art.ID+"/", "", func(k, _ []byte) (bool, error) {
		blobs = append(blobs, strings.TrimPrefix(string(k), kBlob+art.ID+"/"))
		return true, nil
	}); err != nil {
		return nil, err
	}
	for _, b := range blobs {
		if err := state.FreeBlob(a.B, b); err != nil {
			return nil, err
		}
	}
	for _, prefix := range []string{kVersion, kAsset, kHistory, kBlob, kRow, kIndex, kChange} {
		p := prefix + art.ID + "/"
		if err := a.B.DeleteRange([]byte(p), state.Upper(p), nil); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{kArtifact + art.ID, kSchema + art.ID} {
		if err := a.B.Delete([]byte(k), nil); err != nil {
			return nil, err
		}
	}
	return artifactResult{ID: art.ID, Removed: true}, nil
}

// Room lists the seats in an artifact's room now (ART-6).
func (st *Store) Room(ctx context.Context, id string) ([]Presence, error) { return st.s.room(ctx, id) }

// File is one file of an artifact's current version, as the hub's file
// route serves it.
type File struct {
	Path string
	Type string
	Data []byte
}

// Open reads one file of an artifact's current version (its main file for
// an empty path, an asset under assets/) for caller, decided like every
// read: no relation is the missing id's refusal, the trash is refused
// naming it, and an administrator's read through the admin path is
// recorded before any byte is handed over.
func (st *Store) Open(ctx context.Context, c authority.Caller, id, p string) (File, error) {
	s := st.s
	art, _, err := s.readable(ctx, c, id, "artifact file route", p)
	if err != nil {
		return File{}, err
	}
	var f fileRef
	found := false
	err = s.w.View(func(r pebble.Reader) error {
		if p == "" {
			p = art.Main
		}
		if rest, ok := strings.CutPrefix(p, assetDir); ok {
			var err error
			found, err = state.GetJSON(r, kAsset+art.ID+"/"+rest, &f)
			return err
		}
		v, err := readVersion(r, art.ID, art.Head)
		if err != nil || v == nil {
			return err
		}
		f, found = v.Files[p]
		return nil
	})
	if err != nil {
		return File{}, err
	}
	if !found {
		return File{}, authority.Refuse(authority.NotFound, "%s has no file %s in its current version.", id, p)
	}
	data, err := s.readFile(ctx, f)
	if err != nil {
		return File{}, err
	}
	return File{Path: p, Type: f.Type, Data: data}, nil
}
