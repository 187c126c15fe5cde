package tracker

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/servers"
	"github.com/crewlet/hub/servers/state"
)

// Wakes answers up to limit of the tracker's wake rows after cursor (""
// for the first), in the order they were written: the seats named in a
// comment, put a question or handed an item (TRK-4). Subject is the
// item's key.
func Wakes(n *state.Node, after string, limit int) ([]servers.Wake, error) {
	return servers.Wakes(n, kWake, after, limit)
}

// Trigger reads what a tracker wake row woke its seat with: the comment
// that mentioned or asked it, the question an item puts to it, or, for an
// item handed to it, the item's title and description.
func Trigger(n *state.Node, w servers.Wake) (servers.Trigger, error) {
	var t servers.Trigger
	err := n.View(func(r pebble.Reader) error {
		it, err := readItem(r, w.Subject)
		if err != nil {
			return err
		}
		if it == nil {
			return fmt.Errorf("tracker: no item %s", w.Subject)
		}
		named := fmt.Sprintf("%s (%s)", it.Key, it.Title)
		if w.Comment > 0 {
			for _, c := range it.Thread {
				if c.ID == w.Comment {
					t = servers.Trigger{Text: c.Body, Author: c.By, About: "a comment on " + named}
					if c.Ask != nil && strings.EqualFold(c.Ask.To, w.Seat) {
						t.About = "a question on " + named
					}
					return nil
				}
			}
			return fmt.Errorf("tracker: no comment %d on %s", w.Comment, it.Key)
		}
		if q := it.Question; q != nil && strings.EqualFold(q.To, w.Seat) && !q.Answered {
			t = servers.Trigger{Text: q.Text, Author: it.CreatedBy, About: "the question " + named + " puts to you"}
			return nil
		}
		text := it.Title
		if it.Description != "" {
			text += "\n\n" + it.Description
		}
		by := it.CreatedBy
		if len(it.DescribedBy) > 0 {
			by = it.DescribedBy[len(it.DescribedBy)-1]
		}
		about := "the work item " + named + ", whose description names you"
		if strings.EqualFold(it.Assignee, w.Seat) {
			about = "the work item " + named + ", handed to you"
		}
		t = servers.Trigger{Text: text, Author: by, About: about}
		return nil
	})
	return t, err
}
