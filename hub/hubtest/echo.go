package hubtest

import (
	"context"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EchoIn is what the echo tool takes: text to answer, or a refusal class
// to answer with instead.
type EchoIn struct {
	Text   string `json:"text"`
	Refuse string `json:"refuse,omitempty"`
}

// EchoServer is a first-party server with one tool, echo, which answers
// its text, or refuses with the class it is asked for: a real tool for
// tests that watch calls go through the hub (metrics, traces, the screen).
// Mount it as a hub.FirstParty whose New returns EchoServer(trust).
func EchoServer(trust servers.Trust) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "0"}, nil)
	servers.Register(s, trust, nil, servers.Typed("echo", "Answer the text given.",
		servers.Hints{ReadOnly: servers.Yes, OpenWorld: servers.No}, "",
		func(_ context.Context, _ authority.Caller, in EchoIn) (EchoIn, error) {
			if in.Refuse != "" {
				return EchoIn{}, authority.Refuse(authority.Class(in.Refuse), "refused as asked")
			}
			return in, nil
		}))
	return s
}
