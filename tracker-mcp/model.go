package tracker

import (
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers"
)

// project is one project as the projection holds it.
type project struct {
	Key             string         `json:"key"`
	Name            string         `json:"name"`
	Unit            string         `json:"unit,omitempty"`
	Lead            string         `json:"lead,omitempty"`
	DefaultAssignee string         `json:"default_assignee,omitempty"`
	Labels          []string       `json:"labels,omitempty"`
	Next            int            `json:"next"` // highest number handed out
	Version         int            `json:"version"`
	CreatedAt       time.Time      `json:"created_at"`
	Counts          map[string]int `json:"counts,omitempty"` // items per status
}

// projectDecl is what a write carries to declare a project that has no row
// yet: projects come from the directory's units, and the first write that
// needs one records it, so every node creates it the same way.
type projectDecl struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	Lead string `json:"lead,omitempty"`
}

type link struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
}

type checkItem struct {
	ID   int    `json:"id"`
	Text string `json:"text"`
	Done bool   `json:"done"`
}

type question struct {
	To       string   `json:"to"`
	Text     string   `json:"text"`
	Options  []string `json:"options,omitempty"`
	Answered bool     `json:"answered,omitempty"`
	Choice   string   `json:"choice,omitempty"`
	AnswerBy string   `json:"answer_by,omitempty"`
}

type comment struct {
	ID       int            `json:"id"`
	By       servers.Author `json:"by"`
	At       time.Time      `json:"at"`
	Body     string         `json:"body"`
	Mentions []string       `json:"mentions,omitempty"`
	Ask      *question      `json:"ask,omitempty"`
	Answers  int            `json:"answers,omitempty"` // the comment whose question this answers
	Choice   string         `json:"choice,omitempty"`
}

// historyRow describes a change; it never quotes text (a row is kept forever
// on every node), it says what moved and by how much.
type historyRow struct {
	At time.Time `json:"at"`
	By string    `json:"by"`
	// OperatorID is the credential the change came through, on the
	// operator surface (OPS-4); a seat's own change has none.
	OperatorID string `json:"operator_id,omitempty"`
	Field      string `json:"field"`
	Change     string `json:"change"`
}

type item struct {
	ID            string           `json:"id"`
	Key           string           `json:"key"`
	Project       string           `json:"project"`
	Number        int              `json:"number"`
	Title         string           `json:"title"`
	TitledBy      []servers.Author `json:"titled_by,omitempty"`
	Description   string           `json:"description,omitempty"`
	DescribedBy   []servers.Author `json:"described_by,omitempty"`
	Status        string           `json:"status"`
	Assignee      string           `json:"assignee,omitempty"`
	Triage        bool             `json:"triage,omitempty"`
	Priority      string           `json:"priority,omitempty"`
	Labels        []string         `json:"labels,omitempty"`
	Parent        string           `json:"parent,omitempty"`
	Links         []link           `json:"links,omitempty"`
	Checklist     []checkItem      `json:"checklist,omitempty"`
	Question      *question        `json:"question,omitempty"`
	Thread        []comment        `json:"thread,omitempty"`
	History       []historyRow     `json:"history,omitempty"`
	Reassignments int              `json:"reassignments,omitempty"`
	OldKeys       []string         `json:"old_keys,omitempty"`
	MergedInto    string           `json:"merged_into,omitempty"`
	// Rank is the card's place in its board column (move_on_board); nil
	// until it is dragged, when it sits by its number.
	Rank      *float64       `json:"rank,omitempty"`
	Version   int            `json:"version"`
	CreatedBy servers.Author `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`

	// LastFailedTurn is the newest turn about the item that ended without
	// answering (failed, undelivered, not_run, ...), as its activity row
	// says it: shown with the item, where the person who woke the seat
	// looks for its answer.
	LastFailedTurn *turnNote `json:"last_failed_turn,omitempty"`
}

// summary is what lists show: small, so a list of many items reads little.
type summary struct {
	Key       string    `json:"key"`
	ID        string    `json:"id"`
	Project   string    `json:"project"`
	Title     string    `json:"title"`
	Status    string    `json:"status"`
	Assignee  string    `json:"assignee,omitempty"`
	Triage    bool      `json:"triage,omitempty"`
	Priority  string    `json:"priority,omitempty"`
	Labels    []string  `json:"labels,omitempty"`
	Parent    string    `json:"parent,omitempty"`
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	Rank      *float64  `json:"rank,omitempty"`
}

// summaryRow is a summary as its rows store it: with who wrote the title,
// so a list fences each title as theirs (WR-10) off the row it walks,
// without reading the item. Answers show the summary alone; the writers
// are named in the fence.
type summaryRow struct {
	summary
	TitledBy []servers.Author `json:"titled_by,omitempty"`
}

func (it *item) summary() summaryRow {
	return summaryRow{summary: summary{Key: it.Key, ID: it.ID, Project: it.Project, Title: it.Title, Status: it.Status,
		Assignee: it.Assignee, Triage: it.Triage, Priority: it.Priority, Labels: it.Labels,
		Parent: it.Parent, Version: it.Version, UpdatedAt: it.UpdatedAt, Rank: it.Rank}, TitledBy: it.titleWriters()}
}

// answer is the summary as every answer that lists items gives it: its
// title fenced as its writers' (WR-10), into e, as get_work_item fences
// it. A row written before rows kept the title's writers reads them off
// its item.
func (row summaryRow) answer(r pebble.Reader, e *servers.Envelope) (summary, error) {
	writers := row.TitledBy
	if len(writers) == 0 {
		full, err := readItem(r, row.Key)
		if err != nil {
			return summary{}, err
		}
		if full != nil {
			writers = full.titleWriters()
		}
	}
	sm := row.summary
	sm.Title = e.Fence(sm.Title, writers)
	return sm, nil
}

// titleWriters are who wrote an item's title: its creator and whoever
// retitled it since, or its creator alone for an item filed before titles
// kept their writers.
func (it *item) titleWriters() []servers.Author {
	if len(it.TitledBy) == 0 {
		return []servers.Author{it.CreatedBy}
	}
	return it.TitledBy
}

// itemResult is what the item projectors record in the op ledger. A
// retried operation is answered from it, so it holds everything the tool's
// answer needs.
type itemResult struct {
	Key           string            `json:"key"`
	ID            string            `json:"id"`
	Version       int               `json:"version"`
	Project       string            `json:"project,omitempty"`
	Status        string            `json:"status,omitempty"`
	Assignee      string            `json:"assignee,omitempty"`
	Triage        bool              `json:"triage,omitempty"`
	Changed       []string          `json:"changed,omitempty"`
	CommentID     int               `json:"comment_id,omitempty"`
	Mentions      []string          `json:"mentions,omitempty"`
	AlreadyPosted bool              `json:"already_posted,omitempty"`
	Rekeyed       map[string]string `json:"rekeyed,omitempty"`
	Reparented    []string          `json:"reparented,omitempty"`
	Unchanged     bool              `json:"unchanged,omitempty"`
	Via           string            `json:"via,omitempty"`
	Question      bool              `json:"question,omitempty"`
}
