package tracker

import (
	"regexp"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/crewlet/hub/authority"
)

// The rules of the board, each written once. A tool calls them to refuse a
// call before it writes; the projector calls the same ones again, because
// the board may have changed between the two and only the projector, in log
// order, decides (see the package documentation).

// ReassignmentBudget is how often an item may be handed on after it was
// filed (TRK-5). It stops work bouncing between seats that each decide it is
// somebody else's.
const ReassignmentBudget = 5

// Bounds on what one item and one call hold (OUT-2). Each keeps every
// answer that carries an item well inside the hub's message frames (an
// item is answered whole by get_work_item, escaped and twice over: as text
// and as structured content), and a write past one is refused naming the
// field and the limit — never cut, never left to fail later as
// unavailable.
const (
	maxTitle       = 512
	maxDescription = 64 << 10
	maxComment     = 16 << 10
	maxShortText   = 4 << 10 // a reason, a checklist entry, a decision option
	maxOptions     = 20
	maxLabels      = 20
	maxChecklist   = 100
	// maxItemText bounds everything people wrote on one item together:
	// description, thread and checklist.
	maxItemText = 512 << 10

	maxProjectName   = 200
	maxProjectLabels = 200
	maxFileType      = 255
	maxStatuses      = 50
	maxPriorities    = 20
	maxStatusName    = 64
	// historyShown is how many of an item's newest history rows
	// get_work_item answers; it says how many older ones it left out.
	historyShown = 100
)

// checkSize refuses text longer than limit bytes.
func checkSize(field, s string, limit int) error {
	if len(s) > limit {
		return authority.Refuse(authority.Invalid, "%s is %d bytes; it may be at most %d. Say it shorter, or put the long form in a project file and point to it.", field, len(s), limit).
			WithData("argument", field).WithData("limit", limit)
	}
	return nil
}

// checkTitle refuses a title that is not one line of at most maxTitle
// bytes.
func checkTitle(title string) error {
	if strings.TrimSpace(title) == "" {
		return authority.Refuse(authority.Invalid, "title is empty; say in one line what the work is.")
	}
	if strings.ContainsAny(title, "\r\n") {
		return authority.Refuse(authority.Invalid, "title holds a line break; a title is one line (put the rest in the description).")
	}
	return checkSize("title", title, maxTitle)
}

// checkOptions refuses too many decision options, or one too long.
func checkOptions(options []string) error {
	if len(options) > maxOptions {
		return authority.Refuse(authority.Invalid, "decision lists %d options; at most %d.", len(options), maxOptions)
	}
	for _, o := range options {
		if err := checkSize("a decision option", o, maxShortText); err != nil {
			return err
		}
	}
	return nil
}

// itemText is how many bytes of people's writing an item holds.
func itemText(it *item) int {
	n := len(it.Description)
	for _, c := range it.Thread {
		n += len(c.Body)
	}
	for _, c := range it.Checklist {
		n += len(c.Text)
	}
	return n
}

// checkRoom refuses a write that would put an item's writing past
// maxItemText: adding bytes more, in place of dropping bytes.
func checkRoom(it *item, adding, dropping int) error {
	if total := itemText(it) - dropping + adding; adding > dropping && total > maxItemText {
		return authority.Refuse(authority.Invalid, "%s already holds %d bytes of writing and this would make %d; an item holds at most %d. File a follow-up item and link it (relates_to) instead.", it.Key, itemText(it), total, maxItemText).
			WithData("limit", maxItemText)
	}
	return nil
}

var labelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.:-]{0,47}$`)

// checkItemLabels refuses more labels than an item carries.
func checkItemLabels(labels []string) error {
	if len(labels) > maxLabels {
		return authority.Refuse(authority.Invalid, "labels lists %d labels; an item carries at most %d.", len(labels), maxLabels)
	}
	return nil
}

// checkLabelNames refuses a label that is not a label's shape.
func checkLabelNames(labels []string) error {
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return authority.Refuse(authority.Invalid, "labels holds %q; a label is lower-case letters, digits and _ . : -, up to 48 characters.", l)
		}
	}
	return nil
}

// checkLabels refuses labels the project has not declared.
func checkLabels(p *project, labels []string) error {
	var missing []string
	for _, l := range labels {
		if !slices.Contains(p.Labels, l) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return authority.Refuse(authority.Invalid, "labels names %s, which project %s has not declared. Declare them with write_project, or send labels_create_missing: true.", strings.Join(missing, ", "), p.Key)
	}
	return nil
}

// checkEditable is what every edit of an item asks first, when the call
// is made and again when it is applied: it refuses a change stated
// against a version the item has moved past (if_match), and a change to an
// item merged into another.
func checkEditable(it *item, ifMatch int) error {
	if ifMatch != 0 && ifMatch != it.Version {
		return authority.Refuse(authority.StaleVersion, "%s is at version %d, not %d: it changed after you read it. Read it again and decide from what it says now.", it.Key, it.Version, ifMatch).WithData("version", it.Version)
	}
	if it.MergedInto != "" {
		return authority.Refuse(authority.Invalid, "%s was merged into %s and is closed; change %s instead.", it.Key, it.MergedInto, it.MergedInto)
	}
	return nil
}

// checkReassign refuses handing an item on once its budget is spent
// (TRK-5). Setting the assignee it already has is no reassignment.
func checkReassign(it *item, assignee string) error {
	if assignee != it.Assignee && it.Reassignments >= ReassignmentBudget {
		return authority.Refuse(authority.ReassignmentBudget, "%s has been reassigned %d times, its whole budget; do not reassign it again. Work it, or say in its thread what is blocking it.", it.Key, it.Reassignments)
	}
	return nil
}

// maxDepth bounds how far up a parent chain the cycle check walks; a chain
// longer than this is refused as if it looped.
const maxDepth = 64

// checkParent resolves the item a parent argument names and refuses one
// that names no item (REF-3) or that would make child (nil for a new item)
// its own ancestor, however far up the chain the loop would close.
func checkParent(r pebble.Reader, child *item, parent string) (string, error) {
	p, err := readItem(r, parent)
	if err != nil {
		return "", err
	}
	if p == nil {
		return "", authority.Refuse(authority.Invalid, "parent %s names no work item.", parent)
	}
	if child == nil {
		return p.Key, nil
	}
	for up, depth := p, 0; up != nil; depth++ {
		if up.Key == child.Key || depth == maxDepth {
			return "", authority.Refuse(authority.Invalid, "parent %s would make %s its own ancestor.", p.Key, child.Key)
		}
		if up.Parent == "" {
			break
		}
		if up, err = readItem(r, up.Parent); err != nil {
			return "", err
		}
	}
	return p.Key, nil
}

// dedupe trims, drops empties and keeps the first of each value.
func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		x = strings.TrimSpace(x)
		if x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "nobody"
	}
	return s
}
