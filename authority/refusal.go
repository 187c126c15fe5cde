package authority

import (
	"errors"
	"fmt"
	"net/http"
)

// Class is the machine-readable kind of a refusal. Its string is the stable
// wire code: surfaces that are not a model (dashboards, scripts, the hub's own
// routing) act on it, so a code never changes once shipped.
type Class string

// The refusal classes. Meaning and remedy live in the registry below, so the
// table and the constants cannot drift apart.
const (
	Invalid            Class = "invalid"
	NotFound           Class = "not_found"
	Forbidden          Class = "forbidden"
	StaleVersion       Class = "stale_version"
	Conflict           Class = "conflict"
	Exists             Class = "exists"
	AlreadyAnswered    Class = "already_answered"
	ReassignmentBudget Class = "reassignment_budget"
	InboxFull          Class = "inbox_full"
	NotRunning         Class = "not_running"
	SteerUnsupported   Class = "steer_unsupported"
	BudgetExhausted    Class = "budget_exhausted"
	TurnQuota          Class = "turn_quota"
	Unavailable        Class = "unavailable"
	InternalError      Class = "internal_error"
)

// ClassInfo describes one refusal class for whoever reads it.
type ClassInfo struct {
	Class   Class
	Meaning string // what happened, for a person reading the table
	Remedy  string // what a caller should do next
	// Status is the HTTP status a route that is not a tool call (the
	// REST routes, the screen's forms) answers the class with.
	Status int
}

// registry is the single source of refusal classes. A class not listed here
// cannot be produced: NewRefusal panics on it, and a test walks the table for
// uniqueness.
var registry = []ClassInfo{
	{Invalid, "An argument is wrong; the sentence names which.", "Send a different argument.", http.StatusBadRequest},
	{NotFound, "What the call is about does not exist.", "Stop: it is gone or never existed.", http.StatusNotFound},
	{Forbidden, "This caller may not do this here.", "Ask whoever the sentence names.", http.StatusForbidden},
	{StaleVersion, "The object changed after the caller read it.", "Read it again and decide from what it says now.", http.StatusConflict},
	{Conflict, "The write lost a race, or the object's state moved under it.", "Read it again; a retry may land.", http.StatusConflict},
	{Exists, "What the call would create is already there.", "Edit the existing one.", http.StatusConflict},
	{AlreadyAnswered, "The question this answers already has an answer.", "Read the answer.", http.StatusConflict},
	{ReassignmentBudget, "The item has been handed on as often as it may be.", "Do not reassign it again.", http.StatusConflict},
	{InboxFull, "A person's inbox list is at its ceiling.", "Mark older entries read.", http.StatusConflict},
	{NotRunning, "The run or turn addressed is not running, or not waiting for this.", "Nothing to act on.", http.StatusConflict},
	{SteerUnsupported, "The running turn's runtime cannot take a note mid-turn.", "Wait for the turn to end.", http.StatusConflict},
	{BudgetExhausted, "The company's token budget has no room left in a window; nothing was spent.", "Wait for the window to turn over, or raise its ceiling.", http.StatusTooManyRequests},
	{TurnQuota, "The turn has made as many writes of this kind as one turn may (artifact publishes, bytes, datastore ops).", "Stop and report what was done; a later turn has a fresh quota.", http.StatusTooManyRequests},
	{Unavailable, "This node cannot serve the call right now, or the company does not run what it needs.", "Retry later, or use the backend the company does run.", http.StatusServiceUnavailable},
	{InternalError, "This node failed at something of its own; the call itself was fine.", "Tell whoever runs the node; a retry fails the same way.", http.StatusInternalServerError},
}

var byClass = func() map[Class]ClassInfo {
	m := make(map[Class]ClassInfo, len(registry))
	for _, c := range registry {
		m[c.Class] = c
	}
	return m
}()

// Classes returns the registry, in its documented order.
func Classes() []ClassInfo { return append([]ClassInfo(nil), registry...) }

// HTTPStatus is the HTTP status a class is answered with outside a tool
// call; 500 for a class not in the registry.
func HTTPStatus(c Class) int {
	if info, ok := byClass[c]; ok {
		return info.Status
	}
	return http.StatusInternalServerError
}

// Lookup returns the registry entry for a wire code.
func Lookup(code string) (ClassInfo, bool) {
	c, ok := byClass[Class(code)]
	return c, ok
}

// InternalErrorSentence is the only thing a caller is ever told about a fault
// of the node's own. The cause goes to the node's log, never into the answer,
// so nothing about the node's internals leaks and no caller is invited to
// "fix" an input that was never wrong.
const InternalErrorSentence = "This node failed at something of its own while serving the call; nothing about the call was wrong and retrying will fail the same way. Tell whoever runs the node."

// Refusal is a tool call that was refused: a sentence written for a model and
// a class written for machines. It is an error so that code deep in a server
// can return it through ordinary error paths and the edge can still recover
// the class with errors.As / errors.Is.
type Refusal struct {
	Class    Class
	Sentence string
	// Data carries structured detail a surface may show (e.g. the candidates
	// of an ambiguous lookup). It must never hold secrets or internal causes.
	Data map[string]any
}

func (r *Refusal) Error() string { return string(r.Class) + ": " + r.Sentence }

// Is makes errors.Is(err, authority.ErrNotFound) match any refusal of that
// class, however it was worded and however deeply it was wrapped.
func (r *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.Class == r.Class
}

// Sentinels for errors.Is; one per class.
var (
	ErrInvalid            = &Refusal{Class: Invalid}
	ErrNotFound           = &Refusal{Class: NotFound}
	ErrForbidden          = &Refusal{Class: Forbidden}
	ErrStaleVersion       = &Refusal{Class: StaleVersion}
	ErrConflict           = &Refusal{Class: Conflict}
	ErrExists             = &Refusal{Class: Exists}
	ErrAlreadyAnswered    = &Refusal{Class: AlreadyAnswered}
	ErrReassignmentBudget = &Refusal{Class: ReassignmentBudget}
	ErrInboxFull          = &Refusal{Class: InboxFull}
	ErrNotRunning         = &Refusal{Class: NotRunning}
	ErrSteerUnsupported   = &Refusal{Class: SteerUnsupported}
	ErrBudgetExhausted    = &Refusal{Class: BudgetExhausted}
	ErrTurnQuota          = &Refusal{Class: TurnQuota}
	ErrUnavailable        = &Refusal{Class: Unavailable}
	ErrInternal           = &Refusal{Class: InternalError}
)

// Refuse builds a refusal of a registered class. An unregistered class is a
// programming error, caught the first time the path runs.
func Refuse(c Class, format string, args ...any) *Refusal {
	if _, ok := byClass[c]; !ok {
		panic(fmt.Sprintf("authority: refusal class %q is not in the registry", c))
	}
	return &Refusal{Class: c, Sentence: fmt.Sprintf(format, args...)}
}

// Internal is the refusal for a fault of the node's own: always the fixed
// sentence. The cause is not kept on the refusal at all, so it cannot reach an
// answer by accident; the caller logs it before calling Internal.
func Internal() *Refusal {
	return &Refusal{Class: InternalError, Sentence: InternalErrorSentence}
}

// AsRefusal classes any error for an answer. A refusal anywhere in the chain
// is answered as itself; code that meets a waiting condition returns an
// unavailable refusal where it knows so. Anything unmarked is a fault of the
// node's own and answers internal_error with the fixed sentence. invalid is
// never assumed: only code that knows the input was wrong returns it.
func AsRefusal(err error) *Refusal {
	if err == nil {
		return nil
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return Internal()
}

// WithData returns a copy of r carrying extra structured detail.
func (r *Refusal) WithData(k string, v any) *Refusal {
	c := *r
	c.Data = make(map[string]any, len(r.Data)+1)
	for key, val := range r.Data {
		c.Data[key] = val
	}
	c.Data[k] = v
	return &c
}
