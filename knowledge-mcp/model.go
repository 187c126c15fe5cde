package knowledge

import (
	"time"

	"github.com/crewlet/hub/servers"
)

// Page statuses: a draft is listed in its container and found by no search
// until it is published.
const (
	published = "published"
	draft     = "draft"
)

// page is one page as the projection holds it.
type page struct {
	ID        string `json:"id"`
	Container string `json:"container"`
	Title     string `json:"title"`
	Parent    string `json:"parent,omitempty"`
	Status    string `json:"status"`
	// Body is the page's text; empty, the page is a folder that only
	// groups the pages under it.
	Body      string           `json:"body,omitempty"`
	WrittenBy []servers.Author `json:"written_by,omitempty"` // everybody who wrote its title or body
	// Links are the pages the body links to, by id.
	Links     []string       `json:"links,omitempty"`
	Watchers  []string       `json:"watchers,omitempty"`
	Comments  []pageComment  `json:"comments,omitempty"`
	History   []historyRow   `json:"history,omitempty"`
	Trashed   bool           `json:"trashed,omitempty"`
	Version   int            `json:"version"`
	CreatedBy servers.Author `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

type pageComment struct {
	ID     int            `json:"id"`
	By     servers.Author `json:"by"`
	At     time.Time      `json:"at"`
	Body   string         `json:"body"`
	Edited bool           `json:"edited,omitempty"`
}

// historyRow describes one change to a page. It never quotes text (it is
// kept on every node for good): it says what moved, by whom, at which
// version.
type historyRow struct {
	Version int       `json:"version"`
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	// OperatorID is the credential the change came through, on the
	// operator surface (OPS-4).
	OperatorID string   `json:"operator_id,omitempty"`
	Change     string   `json:"change"`
	Fields     []string `json:"fields,omitempty"`
}

// pageResult is what the page projectors record in the op ledger; a
// retried operation is answered from it.
type pageResult struct {
	ID            string   `json:"id"`
	Container     string   `json:"container"`
	Title         string   `json:"title"`
	Version       int      `json:"version"`
	Status        string   `json:"status,omitempty"`
	Changed       []string `json:"changed,omitempty"`
	CommentID     int      `json:"comment_id,omitempty"`
	AlreadyPosted bool     `json:"already_posted,omitempty"`
}
