package artifacts

import (
	"context"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// ---- upload_artifact_asset ----

type assetIn struct {
	ID      string `json:"id" jsonschema:"the artifact's id (art_...); it must declare the assets capability"`
	Path    string `json:"path" jsonschema:"the asset's name, e.g. logo.png or fonts/inter.woff2"`
	Base64  string `json:"base64,omitempty" jsonschema:"the asset's bytes as base64"`
	Content string `json:"content,omitempty" jsonschema:"the asset's text, for a data file, instead of base64"`
	Type    string `json:"type,omitempty" jsonschema:"media type; by default from the name's extension"`
	servers.OpIDArg
}

type assetOut struct {
	servers.WriteOut
	ID string `json:"id,omitempty"`
	// Ref is the path the artifact's pages use for the asset.
	Ref  string `json:"ref,omitempty"`
	URL  string `json:"url,omitempty"`
	Size int    `json:"size,omitempty"`
}

type assetPayload struct {
	ID   string  `json:"id"`
	Path string  `json:"path"`
	File fileRef `json:"file"`
}

// checkAssetKind refuses what is not an image, a font or a data file.
func checkAssetKind(typ string) error {
	t := strings.ToLower(typ)
	for _, ok := range []string{"image/", "font/", "text/csv", "application/json", "text/plain", "application/font", "application/x-font", "application/vnd.ms-fontobject"} {
		if strings.HasPrefix(t, ok) {
			return nil
		}
	}
	return authority.Refuse(authority.Invalid, "type %s is not an image, a font or a data file (CSV, JSON, text); put pages and scripts in a version with publish_artifact.", typ).WithData("argument", "type")
}

func checkAssets(art *artifact) error {
	if !art.Assets {
		return authority.Refuse(authority.Invalid, "%s does not declare the assets capability, so it has no asset store; an artifact declares it when it is created (assets: true).", art.ID).WithData("argument", "id")
	}
	return nil
}

func (s *srv) uploadAsset(ctx context.Context, c authority.Caller, in assetIn) (assetOut, error) {
	fresh := isFresh(c, in.OpID)
	call, err := s.w.Begin(c, "upload_artifact_asset", &in, false)
	if err != nil {
		return assetOut{}, err
	}
	var ref string
	wo, res, err := servers.Write[artifactResult](ctx, s.w, call, func(r pebble.Reader) (servers.Intent, error) {
		art, err := readArtifact(r, in.ID)
		if err != nil {
			return servers.Intent{}, err
		}
		if _, err := s.decide(c, art, in.ID, authority.VerbPublish); err != nil {
			return servers.Intent{}, err
		}
		if err := trashed(art); err != nil {
			return servers.Intent{}, err
		}
		if err := checkAssets(art); err != nil {
			return servers.Intent{}, err
		}
		p, err := cleanPath("path", in.Path)
		if err != nil {
			return servers.Intent{}, err
		}
		q, err := quotaOf(r, c)
		if err != nil {
			return servers.Intent{}, err
		}
		data, err := decode("asset", &fileIn{Content: in.Content, Base64: in.Base64})
		if err != nil {
			return servers.Intent{}, err
		}
		if len(data) == 0 {
			return servers.Intent{}, authority.Refuse(authority.Invalid, "the asset is empty; send its bytes as base64 (or a data file's text as content).").WithData("argument", "base64")
		}
		if len(data) > maxInline {
			return servers.Intent{}, tooBig("base64 (decoded)", len(data), maxInline)
		}
		if err := checkPublish(q, art.ID, false, int64(len(data))); err != nil {
			return servers.Intent{}, err
		}
		typ, err := typeOf(p, data, in.Type)
		if err != nil {
			return servers.Intent{}, err
		}
		if err := checkAssetKind(typ); err != nil {
			return servers.Intent{}, err
		}
		f, err := s.stager(ctx, call, fresh).put(assetDir+p, data, typ)
		if err != nil {
			return servers.Intent{}, err
		}
		ref = assetDir + p
		return servers.Intent{Kind: kindAsset, Payload: assetPayload{ID: art.ID, Path: p, File: f}, What: fmt.Sprintf("the asset %s of %s", p, art.ID)}, nil
	})
	if err != nil {
		return assetOut{}, err
	}
	out := assetOut{WriteOut: wo, ID: in.ID}
	if res != nil {
		out.Ref, out.URL = res.Ref, s.url(in.ID)+res.Ref
		s.eraseFreed(ctx)
		s.enter(ctx, c, in.ID, editing, "asset "+res.Ref)
	} else if ref != "" {
		out.Ref = ref
	}
	return out, nil
}

func applyAsset(a *applier) (any, error) {
	var pl assetPayload
	if err := a.Payload(&pl); err != nil {
		return nil, err
	}
	art, err := a.open(pl.ID)
	if err != nil {
		return nil, err
	}
	if err := checkAssets(art); err != nil {
		return nil, err
	}
	if err := a.countPublish(art.ID, false, int64(pl.File.Size)); err != nil {
		return nil, err
	}
	key := kAsset + art.ID + "/" + pl.Path
	var old fileRef
	found, err := state.GetJSON(a.R, key, &old)
	if err != nil {
		return nil, err
	}
	// Assets are not versioned: the one replaced keeps no bytes anywhere.
	if found && old.Blob != pl.File.Blob {
		if err := a.free(art.ID, old.Blob); err != nil {
			return nil, err
		}
	}
	if err := a.hold(art.ID, pl.File.Blob); err != nil {
		return nil, err
	}
	if err := state.SetJSON(a.B, key, pl.File); err != nil {
		return nil, err
	}
	if err := a.history(art.ID, "uploaded the asset "+assetDir+pl.Path, 0); err != nil {
		return nil, err
	}
	return artifactResult{ID: art.ID, Ref: assetDir + pl.Path}, nil
}

// eraseFreed erases the bytes a write just freed, so they are gone when
// it answers; what fails here the node's blob keeper erases later.
func (s *srv) eraseFreed(ctx context.Context) {
	if err := s.w.Node().EraseFreed(ctx); err != nil {
		s.d.Logger.Error("artifacts: erasing freed bytes", "err", err)
	}
}
