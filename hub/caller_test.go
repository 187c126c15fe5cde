package hub

import (
	"context"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
)

// OPS-3, OPS-4: the operator surface hands a first-party server the whole
// caller of the credential on the request, its administrator flag
// included: an unbound administrator's token arrives as one, a plain
// unbound token does not, and neither borrows a seat.
func TestOperatorCallerCarriesTheCredentialsAdminFlag(t *testing.T) {
	c := hubtest.NewCompany().Person("ada", false).AdminToken("ci", "CI_TOKEN").Token("ro", "RO_TOKEN", "").Parse(t)
	h, err := New(context.Background(), Options{Company: c, FirstParty: []FirstParty{kitServer()},
		Env: hubtest.NewEnv(map[string]string{"CI_TOKEN": "ci-token-123456", "RO_TOKEN": "ro-token-123456"}).Lookup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	endpoint := hubtest.Serve(t, h.Handler()) + "/operator/mcp"
	for token, want := range map[string]echoOut{
		"ci-token-123456": {Text: "x", Seat: "token:ci", Kind: "operator", Op: "ci", Admin: true},
		"ro-token-123456": {Text: "x", Seat: "token:ro", Kind: "operator", Op: "ro"},
	} {
		cs := hubtest.Connect(t, endpoint, token, "")
		_, out := callEcho(t, cs, map[string]any{"text": "x"})
		if out != want {
			t.Errorf("%s: the server saw %+v, want %+v", want.Op, out, want)
		}
	}
}
