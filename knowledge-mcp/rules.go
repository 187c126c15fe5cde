package knowledge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
)

// The rules of the knowledge base, each written once: a tool calls them to
// refuse a call before it writes, and the projector calls the same ones
// again, in log order, where they decide.

// Bounds (OUT-2): each keeps every answer that carries a page well inside
// the hub's message frames; a write past one is refused naming the field
// and the limit, never cut.
const (
	maxTitle    = 200
	maxBody     = 256 << 10
	maxComment  = 16 << 10
	maxPageText = 512 << 10 // body and comments of one page together
	maxDepth    = 64        // how far up a parent chain the loop check walks
)

// reserved are containers the engine keeps for itself (a seat's private
// diary, its synthesized skills): no page tool writes there.
var reserved = []string{"AGENT_DIARY", "SKILLS"}

func isReserved(container string) bool { return slices.Contains(reserved, strings.ToUpper(container)) }

func checkSize(field, s string, limit int) error {
	if len(s) > limit {
		return authority.Refuse(authority.Invalid, "%s is %d bytes; it may be at most %d. Split it into pages that link each other.", field, len(s), limit).
			WithData("argument", field).WithData("limit", limit)
	}
	return nil
}

// checkTitle refuses a title that is empty, more than one line or too
// long: a title is a page's address.
func checkTitle(title string) error {
	if strings.TrimSpace(title) == "" {
		return authority.Refuse(authority.Invalid, "title is empty; a page's title is its address in its container.")
	}
	if strings.ContainsAny(title, "\r\n") {
		return authority.Refuse(authority.Invalid, "title holds a line break; a title is one line.")
	}
	return checkSize("title", title, maxTitle)
}

// checkStatus answers the status a write asks for: published when none,
// refused when it is anything but published or draft.
func checkStatus(status string) (string, error) {
	switch status {
	case "":
		return published, nil
	case published, draft:
		return status, nil
	}
	return "", authority.Refuse(authority.Invalid, "status %q is neither published nor draft.", status)
}

// checkTitleFree refuses a title another page of the container already
// has (exists): titles are addresses, unique per container. self is the
// page being retitled, which may keep its own.
func checkTitleFree(r pebble.Reader, container, title, self string) error {
	other, err := pageByTitle(r, container, title)
	if err != nil {
		return err
	}
	if other != nil && other.ID != self {
		return authority.Refuse(authority.Exists, "%s already has a page titled %q (%s); edit that one with save_page, or choose another title.", container, other.Title, other.ID).
			WithData("page", other.ID)
	}
	return nil
}

// checkParent refuses a parent that names no page (REF-3), one in another
// container or in the trash, and one that is the page itself or beneath it
// (self nil for a new page). It answers the parent's id.
func checkParent(r pebble.Reader, container, parent string, self *page) (string, error) {
	p, err := readPage(r, parent)
	if err != nil {
		return "", err
	}
	switch {
	case p == nil:
		return "", authority.Refuse(authority.Invalid, "parent %s names no page.", parent)
	case p.Container != container:
		return "", authority.Refuse(authority.Invalid, "parent %s is in %s, not %s; a page's parent is in its own container.", p.ID, p.Container, container)
	case p.Trashed:
		return "", authority.Refuse(authority.Invalid, "parent %s is in the trash; choose a parent that is not.", p.ID)
	}
	if self == nil {
		return p.ID, nil
	}
	for up, depth := p, 0; up != nil; depth++ {
		if up.ID == self.ID || depth == maxDepth {
			return "", authority.Refuse(authority.Invalid, "parent %s is %s itself or beneath it; a page cannot be moved under itself.", p.ID, self.ID)
		}
		if up.Parent == "" {
			break
		}
		if up, err = readPage(r, up.Parent); err != nil {
			return "", err
		}
	}
	return p.ID, nil
}

// checkVersion refuses a save stated against a version the page moved
// past, saying what changed since (stale_version).
func checkVersion(p *page, version int) error {
	if version == p.Version {
		return nil
	}
	var since []string
	for _, h := range p.History {
		if h.Version > version {
			since = append(since, fmt.Sprintf("version %d: %s by %s", h.Version, h.Change, h.By))
		}
	}
	r := authority.Refuse(authority.StaleVersion, "%s is at version %d, not %d: %s. Read it again with get_page and make your edit on what it says now.",
		p.ID, p.Version, version, strings.Join(since, "; ")).WithData("version", p.Version)
	if len(since) > 0 {
		r = r.WithData("changed_since", since)
	}
	return r
}

// checkOpen refuses a change to a page in the trash.
func checkOpen(p *page) error {
	if p.Trashed {
		return inTrash(p)
	}
	return nil
}

// inTrash is what a read or a write of a page in the trash is told: that
// it is there, and who may take it out, since nothing of it is served or
// changed until a person does (ART-4, as an artifact in the trash is
// refused). Forbidden, not not_found: the page exists, and the remedy is
// to ask somebody.
func inTrash(p *page) *authority.Refusal {
	by := "whoever put it there"
	if h, ok := trashedRow(p); ok {
		by = "@" + h.By + ", who put it there"
	}
	return authority.Refuse(authority.Forbidden, "%s is in the trash: nothing of it is read or written until a person restores it with restore_from_trash — the lead of %s, an administrator, or %s.", p.ID, p.Container, by).
		WithData("trashed", true)
}

// pageText is how many bytes of people's writing a page holds.
func pageText(p *page) int {
	n := len(p.Body)
	for _, c := range p.Comments {
		n += len(c.Body)
	}
	return n
}

// checkRoom refuses a write that would put a page's writing past
// maxPageText: adding bytes more, in place of dropping bytes.
func checkRoom(p *page, adding, dropping int) error {
	if total := pageText(p) - dropping + adding; adding > dropping && total > maxPageText {
		return authority.Refuse(authority.Invalid, "%s already holds %d bytes of writing and this would make %d; a page holds at most %d. Start a new page and link it.", p.ID, pageText(p), total, maxPageText).
			WithData("limit", maxPageText)
	}
	return nil
}
