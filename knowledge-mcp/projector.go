package knowledge

import (
	"slices"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/search"
	"github.com/crewlet/hub/servers/state"
)

// Operation kinds, one projector each.
const (
	kindWrite   = "knowledge.page.write"
	kindSave    = "knowledge.page.save"
	kindComment = "knowledge.page.comment"
	kindTrash   = "knowledge.page.trash"
)

// Projectors returns the knowledge base's projectors; whoever opens the
// state node registers them.
func Projectors() []state.Projector {
	return []state.Projector{
		applying(kindWrite, applyWrite),
		applying(kindSave, applySave),
		applying(kindComment, applyComment),
		applying(kindTrash, applyTrash),
	}
}

// applier is one knowledge operation being applied.
type applier struct{ *servers.Apply }

func applying(kind string, apply func(*applier) (any, error)) state.Projector {
	return servers.Projector(kind, func(a *servers.Apply) (any, error) { return apply(&applier{a}) })
}

func (a *applier) mustPage(id string) (*page, error) {
	p, err := readPage(a.R, id)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, authority.Refuse(authority.NotFound, "No page has the id %q.", id)
	}
	return p, nil
}

// putPage writes a page and keeps its title address, its place in the
// container's tree and the "Linked from" rows of what it links to in step
// with it. old is the page as it was (nil for a new one).
func (a *applier) putPage(old, p *page) error {
	if old != nil {
		if titleKey(old.Container, old.Title) != titleKey(p.Container, p.Title) {
			if err := a.B.Delete([]byte(titleKey(old.Container, old.Title)), nil); err != nil {
				return err
			}
		}
		for _, k := range old.indexKeys() {
			if err := a.B.Delete([]byte(k), nil); err != nil {
				return err
			}
		}
	}
	if err := state.SetJSON(a.B, kPage+p.ID, p); err != nil {
		return err
	}
	if err := state.SetJSON(a.B, titleKey(p.Container, p.Title), p.ID); err != nil {
		return err
	}
	for _, k := range p.indexKeys() {
		if err := a.B.Set([]byte(k), nil, nil); err != nil {
			return err
		}
	}
	// Every page write can change what a search finds: its words, its
	// container, whether it is a draft or in the trash.
	return search.Touch(a.B, a.Pos, SearchKind, p.ID)
}

// indexKeys are the empty rows a page is filed under: its place in its
// container's tree and one "Linked from" row per page it links to. (Its
// title address holds its id and is written beside them.)
func (p *page) indexKeys() []string {
	keys := []string{childKey(p.Container, p.Parent, p.ID)}
	for _, l := range p.Links {
		keys = append(keys, kLinkedFrom+l+"/"+p.ID)
	}
	return keys
}

func (a *applier) history(p *page, change string, fields []string) {
	p.History = append(p.History, historyRow{Version: p.Version, At: a.At(), By: a.By.Seat, OperatorID: a.Op.Caller.OperatorID, Change: change, Fields: fields})
}

// wakeWatchers asks for every watcher of p but the writer to be told.
func (a *applier) wakeWatchers(p *page, comment int) error {
	for _, w := range p.Watchers {
		if w == a.By.Seat {
			continue
		}
		if err := a.Wake(kWake, w, p.ID, comment); err != nil {
			return err
		}
	}
	return nil
}

func clone(p *page) *page {
	c := *p
	c.WrittenBy = slices.Clone(p.WrittenBy)
	c.Links = slices.Clone(p.Links)
	c.Watchers = slices.Clone(p.Watchers)
	c.Comments = slices.Clone(p.Comments)
	c.History = slices.Clone(p.History)
	return &c
}
