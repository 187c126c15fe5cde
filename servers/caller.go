package servers

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/crewlet/hub/authority"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Trust decides whose caller metadata a server believes. The metadata names
// the seat a write is attributed to, so believing it from anybody would let
// any client write as anybody: it is taken only from a party that holds the
// shared proof.
//
// The hub mounts a server in-process with a fresh random proof that never
// leaves the process (InProcessTrust); a standalone server is given the
// proof of the caller it should trust on its command line (TrustProof). The
// zero Trust trusts nobody.
type Trust struct {
	proof string
	// as is who a call that names no caller acts as, for the clients As
	// allows it for; nil: nobody.
	as       *authority.Caller
	asAnyone bool
	// direct, for a server in the hub's own process, is where Register
	// files each tool's handler for a direct call (InProcess).
	direct *Direct
}

// As returns the trust with a seat for calls that name no caller, as a
// server run on its own for one person has: an ordinary MCP client cannot
// put a caller and a proof in its requests' metadata. anyone: every client
// gets it (over stdio the client is whoever started the process, who chose
// the seat); otherwise only a client presenting the proof does (over
// HTTP). A call that names a caller is judged as without As.
func (t Trust) As(c authority.Caller, anyone bool) Trust {
	t.as, t.asAnyone = &c, anyone
	return t
}

// TrustProof trusts callers presenting proof, in the request metadata
// (MetaProof) or, over HTTP, as the bearer token.
func TrustProof(proof string) Trust { return Trust{proof: proof} }

// InProcessTrust returns a trust with a random proof for a server the hub
// connects to over an in-memory transport, and the proof the hub must send.
func InProcessTrust() (Trust, string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("servers: no randomness for an in-process proof: " + err.Error())
	}
	p := hex.EncodeToString(b[:])
	return Trust{proof: p}, p
}

// CallerMeta is the request metadata a trusted party sends with a call.
func CallerMeta(c authority.Caller, proof string) mcp.Meta {
	return mcp.Meta{MetaCaller: c, MetaProof: proof}
}

// Caller returns who is calling, or a forbidden refusal when the request does
// not come from a trusted party or names no valid caller.
func (t Trust) Caller(req *mcp.CallToolRequest) (authority.Caller, error) {
	var meta mcp.Meta
	if req != nil && req.Params != nil {
		meta = req.Params.Meta
	}
	proven := t.trusted(req, meta)
	raw, ok := meta[MetaCaller]
	if !ok && t.as != nil && (t.asAnyone || proven) {
		return *t.as, nil
	}
	if !proven {
		return authority.Caller{}, authority.Refuse(authority.Forbidden,
			"This server takes calls only from the hub or from the caller it was started to trust; this connection presented no such proof.")
	}
	if !ok {
		return authority.Caller{}, authority.Refuse(authority.Forbidden,
			"The call names no caller, so nobody could be held to it; it was not run.")
	}
	if c, ok := raw.(authority.Caller); ok {
		// The typed value, as the hub sends it in-process.
		if !c.Valid() {
			return authority.Caller{}, authority.Refuse(authority.Forbidden,
				"The call's caller is not a seat, a person or an operator credential; it was not run.")
		}
		return c, nil
	}
	var c authority.Caller
	// The metadata arrives as a decoded JSON value over a wire transport and
	// as the typed value in-process; a round trip reads both.
	b, err := json.Marshal(raw)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || !c.Valid() {
		return authority.Caller{}, authority.Refuse(authority.Forbidden,
			"The call's caller is not a seat, a person or an operator credential; it was not run.")
	}
	return c, nil
}

func (t Trust) trusted(req *mcp.CallToolRequest, meta mcp.Meta) bool {
	if t.proof == "" {
		return false
	}
	if p, ok := meta[MetaProof].(string); ok && equal(p, t.proof) {
		return true
	}
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		h := req.Extra.Header.Get("Authorization")
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && equal(strings.TrimSpace(tok), t.proof) {
			return true
		}
	}
	return false
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
