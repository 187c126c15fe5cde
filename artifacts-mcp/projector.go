package artifacts

import (
	"fmt"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// Operation kinds, one projector each.
const (
	kindCreate   = "artifacts.create"
	kindPublish  = "artifacts.publish"
	kindUpdate   = "artifacts.update"
	kindShare    = "artifacts.share"
	kindAsset    = "artifacts.asset"
	kindElevated = "artifacts.elevated_read"
	kindTrash    = "artifacts.trash"
	kindPurge    = "artifacts.purge"
	kindTransfer = "artifacts.transfer"
	kindData     = "artifacts.data.write"
	kindSchema   = "artifacts.data.schema"
)

// Projectors returns the artifact store's projectors; whoever opens the
// state node registers them.
func Projectors() []state.Projector {
	return []state.Projector{
		applying(kindCreate, applyCreate),
		applying(kindPublish, applyPublish),
		applying(kindUpdate, applyUpdate),
		applying(kindShare, applyShare),
		applying(kindAsset, applyAsset),
		applying(kindElevated, applyElevated),
		applying(kindTrash, applyTrash),
		applying(kindPurge, applyPurge),
		applying(kindTransfer, applyTransfer),
		applying(kindData, applyData),
		applying(kindSchema, applySchema),
	}
}

// applier is one artifact operation being applied.
type applier struct{ *servers.Apply }

func applying(kind string, apply func(*applier) (any, error)) state.Projector {
	return servers.Projector(kind, func(a *servers.Apply) (any, error) { return apply(&applier{a}) })
}

// must reads an artifact the operation is about.
func (a *applier) must(id string) (*artifact, error) {
	art, err := readArtifact(a.R, id)
	if err != nil {
		return nil, err
	}
	if art == nil {
		return nil, authority.ArtifactMissing(id)
	}
	return art, nil
}

// open reads an artifact a write is about, refusing one in the trash.
func (a *applier) open(id string) (*artifact, error) {
	art, err := a.must(id)
	if err != nil {
		return nil, err
	}
	return art, trashed(art)
}

func (a *applier) put(art *artifact) error { return state.SetJSON(a.B, kArtifact+art.ID, art) }

// history adds a row to an artifact's history.
func (a *applier) history(id, what string, ver int) error {
	k := fmt.Sprintf("%s%s/%016x/%04d", kHistory, id, a.Pos, a.Seq())
	return state.SetJSON(a.B, k, historyRow{At: a.At(), By: a.By.Seat, OperatorID: a.Op.Caller.OperatorID, What: what, Version: ver})
}

// hold records that the artifact refers to a blob: it is kept until the
// artifact is purged (or, for an asset, replaced).
func (a *applier) hold(id, blob string) error {
	if err := state.HoldBlob(a.B, blob); err != nil {
		return err
	}
	return a.B.Set([]byte(kBlob+id+"/"+blob), nil, nil)
}

// free lets a blob go: the node erases its bytes once the batch commits.
func (a *applier) free(id, blob string) error {
	if err := state.FreeBlob(a.B, blob); err != nil {
		return err
	}
	return a.B.Delete([]byte(kBlob+id+"/"+blob), nil)
}
