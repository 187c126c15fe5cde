package servers

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crewlet/hub/authority"
)

// Who a server believes a call is from, with and without a seat for calls
// that name none (a server run on its own with --as): over stdio any client
// gets the seat, over HTTP only one presenting the token, and naming
// another caller still needs the proof.
func TestTrustAs(t *testing.T) {
	me := authority.Caller{Seat: "admin", Kind: authority.KindHuman, Requester: "admin", OperatorID: "cli"}
	other := authority.Caller{Seat: "bob", Kind: authority.KindHuman, Requester: "bob"}
	bearer := func(tok string) *mcp.RequestExtra {
		return &mcp.RequestExtra{Header: map[string][]string{"Authorization": {"Bearer " + tok}}}
	}
	req := func(meta mcp.Meta, extra *mcp.RequestExtra) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta}, Extra: extra}
	}
	stdio := TrustProof("").As(me, true)
	http := TrustProof("tok").As(me, false)
	for _, tc := range []struct {
		name  string
		trust Trust
		req   *mcp.CallToolRequest
		want  *authority.Caller // nil: refused forbidden
	}{
		{"stdio, no caller named", stdio, req(nil, nil), &me},
		{"stdio, another caller named without proof", stdio, req(mcp.Meta{MetaCaller: other}, nil), nil},
		{"http, no caller, the token as bearer", http, req(nil, bearer("tok")), &me},
		{"http, no caller, a wrong token", http, req(nil, bearer("guess")), nil},
		{"http, no caller, no token", http, req(nil, &mcp.RequestExtra{Header: map[string][]string{}}), nil},
		{"http, another caller named with the token", http, req(mcp.Meta{MetaCaller: other}, bearer("tok")), &other},
		{"no seat set, no caller named", TrustProof("tok"), req(nil, bearer("tok")), nil},
	} {
		got, err := tc.trust.Caller(tc.req)
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%s: believed %+v", tc.name, got)
		case tc.want == nil:
			if r := authority.AsRefusal(err); r.Class != authority.Forbidden {
				t.Errorf("%s: refused %s, want forbidden", tc.name, r.Class)
			}
		case err != nil || got != *tc.want:
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, *tc.want)
		}
	}
}
