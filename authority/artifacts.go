package authority

import "fmt"

// The artifact authority table (ART-2): who may do what to one artifact.
// It is pure: the artifact store works out each party's relation to the
// artifact (owner, a share to the seat, its unit or the company) and asks
// here, once for the seat and once for whoever its turn acts for (the
// requester ceiling). Nothing here reads a store, so the whole table is a
// data-driven test (testdata/artifacts.json).

// ArtifactRole is a relation to an artifact, ordered: each role may do
// everything the ones below it may.
type ArtifactRole int

const (
	RoleNone ArtifactRole = iota
	RoleViewer
	RoleContributor
	RoleEditor
	RoleOwner
)

var roleNames = []string{"none", "viewer", "contributor", "editor", "owner"}

func (r ArtifactRole) String() string {
	if r < RoleNone || int(r) >= len(roleNames) {
		return fmt.Sprintf("role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseArtifactRole reads a role's name; ok is false for anything else.
func ParseArtifactRole(s string) (ArtifactRole, bool) {
	for i, n := range roleNames {
		if n == s {
			return ArtifactRole(i), true
		}
	}
	return RoleNone, false
}

// MarshalText writes the role's name.
func (r ArtifactRole) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a role's name.
func (r *ArtifactRole) UnmarshalText(b []byte) error {
	v, ok := ParseArtifactRole(string(b))
	if !ok {
		return fmt.Errorf("%q is not a role (viewer, contributor, editor, owner)", b)
	}
	*r = v
	return nil
}

// ArtifactVerb is one row of the table: each artifact tool is named for
// the verb it asks.
type ArtifactVerb string

const (
	// VerbRead: get_artifact, list_artifacts, read_artifact_data,
	// query_artifact_data, and the file route that serves a version.
	VerbRead ArtifactVerb = "read"
	// VerbPublish: publish_artifact and upload_artifact_asset.
	VerbPublish ArtifactVerb = "publish"
	// VerbWriteData: write_artifact_data (each op then meets its
	// collection's own rules at the role the decision answers).
	VerbWriteData ArtifactVerb = "write_data"
	// VerbUpdate: update_artifact (title, description, icon, a label).
	VerbUpdate ArtifactVerb = "update"
	// VerbSchema: set_artifact_schema.
	VerbSchema ArtifactVerb = "schema"
	// VerbShare: share_artifact and unshare_artifact, the owner's.
	VerbShare ArtifactVerb = "share"

	// A person's decisions about the artifact itself, made in the
	// dashboard and offered by no tool (ART-4): see Personal.

	// VerbTrash: putting it in the trash and taking it out again.
	VerbTrash ArtifactVerb = "trash"
	// VerbPurge: deleting one in the trash for good, bytes and all.
	VerbPurge ArtifactVerb = "purge"
	// VerbTransfer: handing its ownership to another seat.
	VerbTransfer ArtifactVerb = "transfer"
)

// Needs is the least role a verb takes. Contributors make content (a
// version, an asset, rows); editors manage the artifact around it (its
// title and labels, its datastore's rules); only the owner says who else
// holds it.
func (v ArtifactVerb) Needs() ArtifactRole {
	switch v {
	case VerbRead:
		return RoleViewer
	case VerbPublish, VerbWriteData:
		return RoleContributor
	case VerbUpdate, VerbSchema:
		return RoleEditor
	case VerbShare, VerbTrash, VerbPurge, VerbTransfer:
		return RoleOwner
	}
	return RoleOwner + 1 // an unknown verb is nobody's
}

// Personal reports whether the verb is a person's decision about the
// artifact as a whole: its owner's, or an administrator's whatever share
// they hold, since an artifact nobody present owns (an agent's, a
// departed person's) must still be cleared, restored or handed on. No
// agent makes one, its own artifact included: what an agent made goes
// away or changes hands only when a person says so.
func (v ArtifactVerb) Personal() bool {
	switch v {
	case VerbTrash, VerbPurge, VerbTransfer:
		return true
	}
	return false
}

// Writes reports whether the verb changes the artifact's content or
// rules: the verbs an agent's own artifact is exempt from the ceiling for.
// Reading and sharing are never exempt.
func (v ArtifactVerb) Writes() bool {
	switch v {
	case VerbPublish, VerbWriteData, VerbUpdate, VerbSchema:
		return true
	}
	return false
}

// RequesterRelation says what the company knows about whom a turn acts for.
type RequesterRelation string

const (
	// RequesterSelf: the call acts for its own caller (a person or a
	// credential on the operator surface, or a turn nobody else woke).
	RequesterSelf RequesterRelation = "self"
	// RequesterKnown: somebody the company's directory holds, who can
	// therefore message the agent.
	RequesterKnown RequesterRelation = "known"
	// RequesterUnknown: nobody the company knows, or nobody at all.
	RequesterUnknown RequesterRelation = "unknown"
)

// ArtifactAsk is one question to the table.
type ArtifactAsk struct {
	Verb ArtifactVerb
	// Kind is the caller's: an agent's call is decided twice, a person's
	// or a credential's once (they act for themselves).
	Kind Kind
	// SeatRole is the caller's own relation to the artifact; Owns says the
	// caller is its owner.
	SeatRole ArtifactRole
	Owns     bool
	// Admin: a person holding admin, or an administrator's credential, on
	// the operator surface (IsAdmin). An agent is never one.
	Admin bool
	// ManageOthers is the company's artifacts.agents_manage_others.
	ManageOthers  bool
	Requester     RequesterRelation
	RequesterRole ArtifactRole
}

// Denial says why a call was refused.
type Denial string

const (
	// DenyNone: allowed.
	DenyNone Denial = ""
	// DenyHidden: no relation; answered exactly as an id nothing holds.
	DenyHidden Denial = "hidden"
	// DenyUnknownRequester: the turn acts for somebody the company does
	// not know, and opens no artifact at all.
	DenyUnknownRequester Denial = "unknown_requester"
	// DenySeatRole: the caller's own role is below what the verb needs.
	DenySeatRole Denial = "seat_role"
	// DenyAgentCap: an agent's role on an artifact it does not own is held
	// to contributor, and the verb needs more.
	DenyAgentCap Denial = "agent_cap"
	// DenyAdminReadOnly: an administrator with no share reads through the
	// admin path and writes nothing.
	DenyAdminReadOnly Denial = "admin_read_only"
	// DenyRequesterRole: whom the turn acts for holds a role below what
	// the verb needs.
	DenyRequesterRole Denial = "requester_role"
	// DenyPersonal: an agent asked for a person's decision (Personal).
	DenyPersonal Denial = "personal"
)

// ArtifactDecision is the table's answer.
type ArtifactDecision struct {
	Denied Denial
	// Role is what the call acts with when allowed: the lower of the
	// seat's and the requester's, or the seat's own for an exempt write.
	// A datastore write is stamped with it.
	Role ArtifactRole
	// SeatRole is the caller's role after the agent cap.
	SeatRole ArtifactRole
	// Exempt: an edit of the agent's own artifact, allowed whatever the
	// requester holds.
	Exempt bool
	// AdminPath: an administrator's read with no share; the elevated-read
	// record must be written before anything is shown.
	AdminPath bool
	// ShowReads says whether what the call may answer beyond its own
	// outcome (a stale publish's live files, a conflict's rows) may be
	// shown: only when the requester could read the artifact too.
	ShowReads bool
	// AsAdmin: a person's decision (Personal) allowed because the caller
	// is an administrator, not because they own the artifact.
	AsAdmin bool
}

// Allowed reports whether the call may go ahead.
func (d ArtifactDecision) Allowed() bool { return d.Denied == DenyNone }

// DecideArtifact answers one question of the table.
func DecideArtifact(a ArtifactAsk) ArtifactDecision {
	need := a.Verb.Needs()
	agent := a.Kind == KindAgent
	if agent && a.Requester != RequesterSelf && a.Requester != RequesterKnown {
		return ArtifactDecision{Denied: DenyUnknownRequester}
	}
	seat := a.SeatRole
	capped := false
	if agent && !a.Owns && !a.ManageOthers && seat > RoleContributor {
		seat, capped = RoleContributor, true
	}
	d := ArtifactDecision{SeatRole: seat}
	if a.Verb.Personal() {
		return decidePersonal(a, d)
	}
	// Once for the seat.
	switch {
	case seat == RoleNone && a.Admin && !agent && a.Verb == VerbRead:
		return ArtifactDecision{Role: RoleViewer, AdminPath: true, ShowReads: true}
	case seat == RoleNone && a.Admin && !agent:
		d.Denied = DenyAdminReadOnly
		return d
	case seat == RoleNone:
		d.Denied = DenyHidden
		return d
	case seat < need && capped && a.SeatRole >= need:
		d.Denied = DenyAgentCap
		return d
	case seat < need:
		d.Denied = DenySeatRole
		return d
	}
	// Then for whom the turn acts.
	if !agent || a.Requester == RequesterSelf {
		d.Role, d.ShowReads = seat, true
		return d
	}
	req := a.RequesterRole
	d.ShowReads = req >= RoleViewer
	if a.Owns && a.Verb.Writes() {
		d.Role, d.Exempt = seat, true
		return d
	}
	switch {
	case req == RoleNone:
		d.Denied = DenyHidden
	case req < need:
		d.Denied = DenyRequesterRole
	default:
		d.Role = min(seat, req)
	}
	return d
}

// decidePersonal decides a person's decision about the artifact: there is
// no requester to ask, since no agent makes one.
func decidePersonal(a ArtifactAsk, d ArtifactDecision) ArtifactDecision {
	switch {
	case a.Kind == KindAgent && d.SeatRole == RoleNone:
		d.Denied = DenyHidden
	case a.Kind == KindAgent:
		d.Denied = DenyPersonal
	case a.Owns:
		d.Role, d.ShowReads = RoleOwner, true
	case a.Admin:
		d.Role, d.ShowReads, d.AsAdmin = RoleOwner, true, true
	case d.SeatRole == RoleNone:
		d.Denied = DenyHidden
	default:
		d.Denied = DenySeatRole
	}
	return d
}

// ArtifactMissing is what an id nothing holds is answered with, and so
// also what a caller with no relation to an artifact is told: one
// sentence, so the answer says nothing about whether the artifact exists.
func ArtifactMissing(id string) *Refusal {
	return Refuse(NotFound, "No artifact has the id %q.", id)
}

// ArtifactRefusal words a denial for the call that was asked about
// artifact id. requester is whom the turn acts for, named in a ceiling's
// refusal.
func ArtifactRefusal(d ArtifactDecision, a ArtifactAsk, id, requester string) *Refusal {
	need := a.Verb.Needs()
	switch d.Denied {
	case DenyNone:
		return nil
	case DenyHidden:
		return ArtifactMissing(id)
	case DenyUnknownRequester:
		return Refuse(Forbidden, "This turn acts for somebody the company does not know, so it opens no artifact and writes none; nothing was read or written. Tell whoever set the turn off.")
	case DenyAgentCap:
		return Refuse(Forbidden, "On an artifact it does not own an agent acts as a contributor at most, and this takes %s (the company's artifacts.agents_manage_others is off). Ask its owner or an editor to make the change.", need)
	case DenyAdminReadOnly:
		return Refuse(Forbidden, "An administrator without a share reads %s through the admin path and changes nothing; this takes %s. Ask its owner for a share.", id, need)
	case DenyPersonal:
		return Refuse(Forbidden, "Putting %s in the trash, restoring, purging or transferring it is a person's decision, made in the dashboard by its owner or an administrator; no agent makes it. Tell whoever you act for.", id)
	case DenySeatRole:
		if a.Verb.Personal() {
			return Refuse(Forbidden, "Your role on %s is %s: putting it in the trash, restoring, purging or transferring it is for its owner or an administrator; ask its owner.", id, d.SeatRole)
		}
		return Refuse(Forbidden, "Your role on %s is %s, and this takes %s; ask its owner.", id, d.SeatRole, need)
	case DenyRequesterRole:
		return Refuse(Forbidden, "This turn acts for @%s, whose role on %s is %s, and this takes %s: an agent does nothing for somebody that they could not do themselves. Ask them to get the role from its owner.", requester, id, a.RequesterRole, need)
	}
	return Refuse(Forbidden, "This call may not touch %s.", id)
}

// RowVisible is a datastore collection's read rule for one reader: their
// role must reach the collection's read role, and where the collection
// assigns rows to a viewer (assigned_to_viewer), a reader below editor
// sees only the rows assigned to them. assignee is the row's value in that
// column ("" when the collection assigns nothing, or the row no one).
func RowVisible(readRole ArtifactRole, assigns bool, assignee string, role ArtifactRole, who string) bool {
	if role < readRole || role == RoleNone {
		return false
	}
	if !assigns || role >= RoleEditor {
		return true
	}
	return assignee != "" && assignee == who
}
