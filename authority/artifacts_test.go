package authority

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type artifactCases struct {
	Decisions []struct {
		Name          string            `json:"name"`
		Verb          ArtifactVerb      `json:"verb"`
		Kind          Kind              `json:"kind"`
		SeatRole      ArtifactRole      `json:"seat_role"`
		Owns          bool              `json:"owns"`
		Admin         bool              `json:"admin"`
		ManageOthers  bool              `json:"manage_others"`
		Requester     RequesterRelation `json:"requester"`
		RequesterRole ArtifactRole      `json:"requester_role"`
		Want          struct {
			Denied    Denial       `json:"denied"`
			Role      ArtifactRole `json:"role"`
			Exempt    bool         `json:"exempt"`
			AdminPath bool         `json:"admin_path"`
			ShowReads bool         `json:"show_reads"`
			AsAdmin   bool         `json:"as_admin"`
			Says      string       `json:"says"`
		} `json:"want"`
	} `json:"decisions"`
	Rows []struct {
		Name     string       `json:"name"`
		ReadRole ArtifactRole `json:"read_role"`
		Assigns  bool         `json:"assigns"`
		Assignee string       `json:"assignee"`
		Role     ArtifactRole `json:"role"`
		Who      string       `json:"who"`
		Visible  bool         `json:"visible"`
	} `json:"rows"`
}

func loadArtifactCases(t *testing.T) artifactCases {
	t.Helper()
	raw, err := os.ReadFile("testdata/artifacts.json")
	if err != nil {
		t.Fatal(err)
	}
	var c artifactCases
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if len(c.Decisions) == 0 || len(c.Rows) == 0 {
		t.Fatal("no cases")
	}
	return c
}

// ART-2: the requester ceiling, decided twice — once for the seat, once
// for whom its turn acts — from testdata/artifacts.json: (seat role,
// requester role, owner, verb) → decision, with the agent's own artifact,
// an unknown requester, the does-not-exist wording, the agent cap and
// agents_manage_others, and an administrator's admin path beside the
// share they hold (ART-5); and a person's decisions — trash, purge,
// transfer — the owner's or an administrator's, never an agent's (ART-4).
func TestArtifactDecisions(t *testing.T) {
	for _, c := range loadArtifactCases(t).Decisions {
		t.Run(c.Name, func(t *testing.T) {
			ask := ArtifactAsk{Verb: c.Verb, Kind: c.Kind, SeatRole: c.SeatRole, Owns: c.Owns, Admin: c.Admin,
				ManageOthers: c.ManageOthers, Requester: c.Requester, RequesterRole: c.RequesterRole}
			d := DecideArtifact(ask)
			w := c.Want
			if d.Denied != w.Denied {
				t.Fatalf("denied %q, want %q (%+v)", d.Denied, w.Denied, d)
			}
			if d.Allowed() {
				if d.Role != w.Role || d.Exempt != w.Exempt || d.AdminPath != w.AdminPath || d.ShowReads != w.ShowReads || d.AsAdmin != w.AsAdmin {
					t.Fatalf("got %+v, want role %s exempt %v admin_path %v show_reads %v as_admin %v", d, w.Role, w.Exempt, w.AdminPath, w.ShowReads, w.AsAdmin)
				}
				if ArtifactRefusal(d, ask, "art_1", "ada") != nil {
					t.Fatal("an allowed call has a refusal")
				}
				return
			}
			r := ArtifactRefusal(d, ask, "art_1", "ada")
			want := Forbidden
			if d.Denied == DenyHidden {
				want = NotFound
				// Exactly the words of an id nothing holds.
				if m := ArtifactMissing("art_1"); r.Class != m.Class || r.Sentence != m.Sentence {
					t.Fatalf("hidden answered %+v, not the missing id's words", r)
				}
			}
			if r.Class != want || !strings.Contains(r.Sentence, w.Says) {
				t.Fatalf("refusal %+v, want %s saying %q", r, want, w.Says)
			}
		})
	}
}

// ART-3: a datastore row is answered only to a reader its collection's
// read rule lets read it, by role and by the row's assignee.
func TestRowVisible(t *testing.T) {
	for _, c := range loadArtifactCases(t).Rows {
		t.Run(c.Name, func(t *testing.T) {
			if got := RowVisible(c.ReadRole, c.Assigns, c.Assignee, c.Role, c.Who); got != c.Visible {
				t.Fatalf("visible %v, want %v", got, c.Visible)
			}
		})
	}
}

func TestArtifactRoleNames(t *testing.T) {
	for r := RoleNone; r <= RoleOwner; r++ {
		back, ok := ParseArtifactRole(r.String())
		if !ok || back != r {
			t.Errorf("%s does not read back", r)
		}
	}
	if _, ok := ParseArtifactRole("admin"); ok {
		t.Error("admin read as a role")
	}
	// A value past either end names itself rather than a role.
	for r, want := range map[ArtifactRole]string{RoleOwner + 1: "role(5)", RoleNone - 1: "role(-1)"} {
		if got := r.String(); got != want {
			t.Errorf("ArtifactRole(%d) = %q, want %q", int(r), got, want)
		}
	}
}
