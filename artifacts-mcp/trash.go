package artifacts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// The trash, restoring from it, purging and transferring ownership are a
// person's decisions, made in the dashboard: no tool offers them (ART-4),
// and the authority table decides each (authority.ArtifactVerb.Personal).
// They are here, as Store methods, because the store's rules depend on
// them (a trashed artifact serves nothing and takes no write), because a
// purge is what really deletes an artifact's bytes, and for the
// dashboard's routes to call.

// Store is the artifact store's entry points beside its tools: a person's
// trash, restore, purge and transfer, the room of an artifact, and the
// file route the hub serves each artifact's current version at.
type Store struct{ s *srv }

// NewStore is the store over the same node and directory the tools use.
func NewStore(d Deps) *Store { return &Store{s: newSrv(d)} }

type trashPayload struct {
	ID      string `json:"id"`
	Restore bool   `json:"restore,omitempty"`
	// Reason is a purge's, kept in the operation the log holds: the one
	// line that outlives everything the purge erases.
	Reason string `json:"reason,omitempty"`
}

// MaxPurgeReason bounds a purge's reason: it is one line of the record,
// and a longer one is refused rather than cut.
const MaxPurgeReason = 280

// Trash puts an artifact in the trash: it serves no content and takes no
// write until a person restores it. Trashing one already there changes
// nothing.
func (st *Store) Trash(ctx context.Context, c authority.Caller, id string) error {
	return st.personal(ctx, c, id, "trash_artifact", authority.VerbTrash, kindTrash, trashPayload{ID: id}, false)
}

// Restore takes an artifact out of the trash.
func (st *Store) Restore(ctx context.Context, c authority.Caller, id string) error {
	return st.personal(ctx, c, id, "restore_artifact", authority.VerbTrash, kindTrash, trashPayload{ID: id, Restore: true}, true)
}

// Purge deletes an artifact in the trash for good: every version, asset,
// row and history line, and every byte of its files, erased from the blob
// store before Purge returns. reason, which may be empty, is one line.
func (st *Store) Purge(ctx context.Context, c authority.Caller, id, reason string) error {
	reason = strings.TrimSpace(reason)
	switch {
	case strings.ContainsAny(reason, "\r\n"):
		return authority.Refuse(authority.Invalid, "reason is one line of the purge's record; write it without line breaks.").WithData("argument", "reason")
	case len(reason) > MaxPurgeReason:
		return authority.Refuse(authority.Invalid, "reason is %d bytes, and a purge's one-line record holds at most %d; shorten it.", len(reason), MaxPurgeReason).
			WithData("argument", "reason").WithData("limit", MaxPurgeReason)
	}
	if err := st.personal(ctx, c, id, "purge_artifact", authority.VerbPurge, kindPurge, trashPayload{ID: id, Reason: reason}, true); err != nil {
		return err
	}
	return st.s.w.Node().EraseFreed(ctx)
}

// personal writes a person's decision about an artifact, as the authority
// table decides it: its owner's, if a person, or an administrator's.
func (st *Store) personal(ctx context.Context, c authority.Caller, id, tool string, verb authority.ArtifactVerb, kind string, pl trashPayload, needTrashed bool) error {
	art, err := st.decided(c, id, verb)
	if err != nil {
		return err
	}
	if needTrashed && !art.Trashed {
		return authority.Refuse(authority.Invalid, "%s is not in the trash.", id)
	}
	pl.ID = art.ID
	return st.write(ctx, c, tool, kind, pl)
}

// decided reads an artifact and asks the table about verb on it.
func (st *Store) decided(c authority.Caller, id string, verb authority.ArtifactVerb) (*artifact, error) {
	s := st.s
	if s.w.Node() == nil {
		return nil, authority.Refuse(authority.Unavailable, "The artifact store has no state node here.")
	}
	var art *artifact
	if err := s.w.View(func(r pebble.Reader) error {
		var err error
		art, err = readArtifact(r, id)
		return err
	}); err != nil {
		return nil, err
	}
	if _, err := s.decide(c, art, id, verb); err != nil {
		return nil, err
	}
	return art, nil
}

// write logs a person's decision; the projector decides it again.
func (st *Store) write(ctx context.Context, c authority.Caller, tool, kind string, pl any) error {
	s := st.s
	args, _ := json.Marshal(pl)
	_, err := s.w.Node().Write(ctx, state.Op{Tool: tool, Args: args, Kind: kind, Payload: args, Caller: c, At: s.w.Now().UTC()})
	return err
}

// Trashed is one artifact in a person's trash.
type Trashed struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Title     string    `json:"title"`
	Owner     string    `json:"owner"`
	TrashedBy string    `json:"trashed_by,omitempty"`
	TrashedAt time.Time `json:"trashed_at"`
}

// maxTrashListed bounds one answer of a person's trash; More counts the
// rest.
const maxTrashListed = 200

// TrashOf lists the artifacts in the trash that c may restore: what they
// own, and for an administrator everything there. more counts those past
// the bound.
func (st *Store) TrashOf(_ context.Context, c authority.Caller) (list []Trashed, more int, err error) {
	s := st.s
	list = []Trashed{}
	err = s.w.View(func(r pebble.Reader) error {
		return each(r, kArtifact, "", func(k, v []byte) (bool, error) {
			var a artifact
			if err := state.DecodeJSON(k, v, &a); err != nil {
				return false, err
			}
			if !a.Trashed {
				return true, nil
			}
			if _, err := s.decide(c, &a, a.ID, authority.VerbTrash); err != nil {
				return true, nil
			}
			if len(list) == maxTrashListed {
				more++
				return true, nil
			}
			// Nothing writes a trashed artifact, so it was last changed
			// when it went in.
			list = append(list, Trashed{ID: a.ID, Kind: a.Kind, Title: a.Title, Owner: a.Owner.Seat, TrashedBy: a.TrashedBy, TrashedAt: a.UpdatedAt})
			return true, nil
		})
	})
	return list, more, err
}

// transferPayload hands an artifact to another seat.
type transferPayload struct {
	ID string         `json:"id"`
	To servers.Author `json:"to"`
}

// Transfer makes the seat to the artifact's owner. Whoever owned it keeps
// an editor's share, if a seat of the company (a credential holds none),
// so handing work on does not lock its maker out of it; any share the new
// owner held is folded into the ownership. An artifact in the trash is
// not transferred: it takes no write until it is restored.
func (st *Store) Transfer(ctx context.Context, c authority.Caller, id, to string) error {
	art, err := st.decided(c, id, authority.VerbTransfer)
	if err != nil {
		return err
	}
	if err := trashed(art); err != nil {
		return err
	}
	handle := strings.TrimPrefix(strings.TrimSpace(to), "@")
	seat, ok := st.s.dir().Seat(handle)
	if !ok {
		return authority.Refuse(authority.Invalid, "to names %q, and nobody in the company has that handle; an artifact is transferred to a seat.", to).WithData("argument", "to")
	}
	pl := transferPayload{ID: art.ID, To: servers.Author{Seat: seat.Handle, Kind: seatKind(seat)}}
	if err := pl.check(art); err != nil {
		return err
	}
	return st.write(ctx, c, "transfer_artifact", kindTransfer, pl)
}

// seatKind is the kind a seat writes as.
func seatKind(seat authority.Seat) authority.Kind {
	if seat.Kind == authority.SeatAgent {
		return authority.KindAgent
	}
	return authority.KindHuman
}

// check is the rule a transfer keeps; Transfer and the projector both ask.
func (pl transferPayload) check(art *artifact) error {
	if strings.EqualFold(pl.To.Seat, art.Owner.Seat) {
		return authority.Refuse(authority.Invalid, "@%s owns %s already.", art.Owner.Seat, art.ID).WithData("argument", "to")
	}
	return nil
}

func applyTransfer(a *applier) (any, error) {
	var pl transferPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	old, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	if err := pl.check(old); err != nil {
		return nil, err
	}
	art := old.clone()
	from := art.Owner
	art.Owner = pl.To
	art.Shares = slices.DeleteFunc(art.Shares, func(sh share) bool {
		return strings.EqualFold(sh.To, pl.To.Seat) || strings.EqualFold(sh.To, from.Seat)
	})
	if from.Kind != authority.KindOperator {
		art.Shares = append(art.Shares, share{To: from.Seat, Role: authority.RoleEditor, By: a.By.Seat, At: a.At()})
	}
	art.UpdatedAt = a.At()
	if err := a.put(art); err != nil {
		return nil, err
	}
	if err := a.history(art.ID, fmt.Sprintf("ownership transferred from @%s to @%s", from.Seat, pl.To.Seat), 0); err != nil {
		return nil, err
	}
	return artifactResult{ID: art.ID}, nil
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
