package hub

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/sanitize"
	"github.com/crewlet/hub/servers/rawjson"
	"github.com/crewlet/hub/servers/seal"
	"github.com/crewlet/hub/servers/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client on MCP 2026-07-28 answers a server's requests for input itself
// (multi round-trip requests, SEP-2322): the hub cannot ask it anything
// while it serves a call, so a third-party server's input_required answer
// goes to the client, sanitised like the rest of the result, and the
// client's next call carries its answers back. The server's requestState
// never reaches the client as the server wrote it: the hub seals it, so
// that the follow-up is bound to the caller (seat and credential), the
// server and the tool it came from, and a state the client changed,
// forged, or brought to another tool or as another caller is refused
// invalid before anything reaches a server. The follow-up is a call of its
// own, decided, bounded and pinned as every call is (Router.call).
//
// The sealing key is the fleet's (fleet_keys.go), so a round begun on one
// node is finished on any other (issue 39, build 2); a node alone draws
// its own at start, and a follow-up that reaches it after a restart is
// refused invalid: the client starts the call over, which a server must
// allow for anyway, since a client may never come back.

// clientRound is what the call of a client on 2026-07-28 brings: the
// answers to the input requests of an earlier answer, and the hub's sealed
// requestState of that answer; both empty on a first call.
type clientRound struct {
	responses mcp.InputResponseMap
	state     string
}

type clientRoundKey struct{}

// firstRound is the round of a call that brings nothing back, shared:
// marking a first call costs no allocation of its own.
var firstRound = &clientRound{}

// withClientRound marks ctx as a call of a client that answers input
// requests itself, carrying r (firstRound: nothing).
func withClientRound(ctx context.Context, r *clientRound) context.Context {
	return context.WithValue(ctx, clientRoundKey{}, r)
}

func clientRoundFrom(ctx context.Context) (*clientRound, bool) {
	r, ok := ctx.Value(clientRoundKey{}).(*clientRound)
	return r, ok && r != nil
}

// takesInputRounds reports a client session on 2026-07-28 or later, as the
// SDK's server tells one: a session without initialize params is one (its
// requests name their revision each).
func takesInputRounds(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	if ip == nil {
		return true
	}
	r, ok := parseRevision(ip.ProtocolVersion)
	return ok && r.atLeast(modernProtocol)
}

// sealedStatePrefix begins every requestState the hub gives a client.
const sealedStatePrefix = "crewlet-state-1."

// stateSeal seals and opens requestStates with its key: the one given
// (the fleet's, or the node's own), or one drawn on first use.
type stateSeal struct {
	key  []byte
	once sync.Once
	box  *seal.Box
	err  error
}

func (s *stateSeal) cipher() (*seal.Box, error) {
	s.once.Do(func() {
		key := s.key
		if key == nil {
			key = make([]byte, 32)
			if _, s.err = rand.Read(key); s.err != nil {
				return
			}
		}
		s.box, s.err = seal.New(key)
	})
	return s.box, s.err
}

// stateBinding is what a sealed state is bound to, as additional data: the
// caller's seat and credential, the server, the tool by the hub's name and
// the server's, and the call's arguments. A follow-up is the call that
// asked, retried with its client's answers (SEP-2322): the same arguments.
// A state brought back with other arguments would have the server finish,
// with the answers the client gave for one request, a request nobody was
// asked about, and could be brought back again and again with any
// arguments (issue 36, Why 10); bound to the arguments it opens for the
// one call it belongs to, with no record kept anywhere, so a fleet needs
// none either.
func stateBinding(caller authority.Caller, e Entry, args json.RawMessage) []byte {
	b := []byte("crewlet requestState\x00")
	for _, part := range []string{caller.Seat, caller.OperatorID, string(e.Source), e.upstream, e.Name} {
		b = append(append(b, part...), 0)
	}
	sum := argsDigest(args)
	return append(b, sum[:]...)
}

// argsDigest digests a call's arguments as their value, not their bytes: a
// client that writes its retry's arguments with other spacing, key order
// or escapes sends the same arguments. Numbers are kept as written.
func argsDigest(args json.RawMessage) [sha256.Size]byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if len(bytes.TrimSpace(args)) == 0 || dec.Decode(&v) != nil {
		return sha256.Sum256(args)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return sha256.Sum256(args)
	}
	return sha256.Sum256(canon)
}

// seal wraps a server's own requestState ("" for none) for the caller's
// follow-up to e. The state is encrypted as well as bound: what a server
// keeps in it is the server's, and a secret in it never reaches the client
// in any encoding.
func (s *stateSeal) seal(caller authority.Caller, e Entry, args json.RawMessage, state string) (string, error) {
	box, err := s.cipher()
	if err != nil {
		return "", err
	}
	sealed, err := box.Seal([]byte(state), stateBinding(caller, e, args))
	if err != nil {
		return "", err
	}
	return sealedStatePrefix + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// open unwraps a sealed state the caller brought to e, answering the
// server's own; ok is false for anything the hub did not seal for this
// caller and this tool.
func (s *stateSeal) open(caller authority.Caller, e Entry, args json.RawMessage, sealed string) (state string, ok bool) {
	box, err := s.cipher()
	if err != nil {
		return "", false
	}
	enc, had := strings.CutPrefix(sealed, sealedStatePrefix)
	if !had {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	plain, err := box.Open(raw, stateBinding(caller, e, args))
	if err != nil {
		return "", false
	}
	return string(plain), true
}

// roundIn checks what a follow-up call brings back and answers what goes
// on to the server: the client's answers and the server's own state. A
// state that does not open for this caller and this tool, or answers
// without the state they go with, is refused invalid.
func (r *Router) roundIn(caller authority.Caller, e Entry, args json.RawMessage, round *clientRound) (*upstream.ClientRounds, *authority.Refusal) {
	switch {
	case round.state == "" && round.responses == nil:
		return noAnswers, nil
	case round.state == "":
		return nil, authority.Refuse(authority.Invalid,
			"The call carries inputResponses without a requestState: answers to a server's input requests go back with the requestState of the answer that asked, unchanged. "+
				"Call %q again without inputResponses to start over.", e.Name).WithData("argument", "requestState")
	}
	state, ok := r.seal.open(caller, e, args, round.state)
	if !ok {
		return nil, authority.Refuse(authority.Invalid,
			"The call's requestState is not one the hub gave this caller for %q with these arguments: a follow-up with a client's input must carry, unchanged and with the same credential, "+
				"the requestState of the input_required answer of the same tool, and that call's arguments (one given before the hub restarted is no longer good). "+
				"Call %q again without inputResponses and requestState to start over.", e.Name, e.Name).WithData("argument", "requestState")
	}
	return &upstream.ClientRounds{Responses: round.responses, State: state}, nil
}

// noAnswers is what a first call carries on, shared.
var noAnswers = &upstream.ClientRounds{}

// roundOut puts the hub's sealed state in place of the server's in a
// sanitised answer that asks the caller for input; raw is the answer as
// the server wrote it, where the server's state is read as it wrote it.
// An answer that asks for input always carries a sealed state, the
// server's own or none: the follow-up is bound either way.
func (r *Router) roundOut(caller authority.Caller, e Entry, args json.RawMessage, raw []byte, op *sanitize.OnePass) error {
	// The state as the SDK's client reads it (keys matched exactly,
	// escapes decoded, the last of two): the sanitiser has read the answer
	// as that client would, so it decodes, and such an answer is rare and
	// small (it holds no content).
	var read mcp.CallToolResult
	if err := json.Unmarshal(raw, &read); err != nil {
		return err
	}
	sealed, err := r.seal.seal(caller, e, args, read.RequestState)
	if err != nil {
		return err
	}
	var protocol []byte
	if len(op.Protocol) > 0 {
		obj := append(append([]byte{'{'}, op.Protocol...), '}')
		err = rawjson.Members(obj, func(key, keyRaw, val []byte) error {
			if string(key) == "requestState" {
				return nil
			}
			if protocol != nil {
				protocol = append(protocol, ',')
			}
			protocol = append(append(append(protocol, keyRaw...), ':'), val...)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if protocol != nil {
		protocol = append(protocol, ',')
	}
	op.Protocol = rawjson.AppendString(append(protocol, `"requestState":`...), sealed)
	return nil
}
