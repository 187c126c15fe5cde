package tracker

import (
	"strings"

	"github.com/crewlet/hub/authority"
)

// The operator-only tools (OPS-3) are a person's, on the operator surface:
// no seat is offered them, and each still decides its own authority on
// every call, since a standalone tracker serves whoever it trusts.

// person refuses a caller who is not a person holding a seat: what is
// asked (an inbox, a queue, pins) belongs to one. what names it.
func person(c authority.Caller, what string) error {
	switch c.Kind {
	case authority.KindHuman:
		return nil
	case authority.KindAgent:
		return authority.Refuse(authority.Forbidden, "%s is a person's, reached on the operator surface; a seat has none. Ask the person you work for.", upperFirst(what))
	default:
		return authority.Refuse(authority.Forbidden, "%s is a person's, and %s is a credential bound to no seat, so it has none. Use a credential bound to your seat.", upperFirst(what), c.Seat)
	}
}

// notASeat refuses a seat a tool only people call.
func notASeat(c authority.Caller, what string) error {
	if c.Kind == authority.KindAgent {
		return authority.Refuse(authority.Forbidden, "%s is for people on the operator surface, not seats.", upperFirst(what))
	}
	return nil
}

// inboxOwner is the key an inbox, a queue or a pin list is kept under: a
// seat's handle, lower-cased, as the directory matches them.
func inboxOwner(seat string) string { return strings.ToLower(seat) }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
