package authority

import (
	"slices"
	"strings"
)

// SeatKind separates the seats that run turns from the people who hold seats.
type SeatKind string

const (
	SeatAgent SeatKind = "agent"
	SeatHuman SeatKind = "human"
)

// Seat is one identity in the company.
type Seat struct {
	Handle string
	Role   string // the role's display name, e.g. "Tech Lead"
	Kind   SeatKind
	Unit   string // the id of the unit it belongs to; empty for a company-level role
	Admin  bool
	// ContactIDs are the accounts a person is reached by (an email, a chat
	// id). Withheld people show none, and their ids name nobody.
	ContactIDs []string
	Withheld   bool
}

// Unit is a team or department.
type Unit struct {
	ID, Name, Type string
	Lead           string // the lead seat's handle
	Project, Space string
	Parent         string
}

// Directory is the company's seats and units as of one applied revision. It
// is immutable: a new revision builds a new Directory.
type Directory struct {
	seats  []Seat
	units  []Unit
	byName map[string]int // lower-cased handle -> index into seats
}

// NewDirectory indexes seats and units. Handles are unique case-insensitively;
// configuration validation guarantees it before a Directory is built.
func NewDirectory(units []Unit, seats []Seat) *Directory {
	d := &Directory{
		seats:  slices.Clone(seats),
		units:  slices.Clone(units),
		byName: make(map[string]int, len(seats)),
	}
	for i, s := range d.seats {
		d.byName[strings.ToLower(s.Handle)] = i
	}
	return d
}

// Seats returns every seat in declaration order.
func (d *Directory) Seats() []Seat { return slices.Clone(d.seats) }

// Units returns every unit in declaration order.
func (d *Directory) Units() []Unit { return slices.Clone(d.units) }

// Seat finds a seat by handle, case-insensitively.
func (d *Directory) Seat(handle string) (Seat, bool) {
	i, ok := d.byName[strings.ToLower(strings.TrimPrefix(handle, "@"))]
	if !ok {
		return Seat{}, false
	}
	return d.seats[i], true
}

// Unit finds a unit by id.
func (d *Directory) Unit(id string) (Unit, bool) {
	for _, u := range d.units {
		if u.ID == id {
			return u, true
		}
	}
	return Unit{}, false
}
