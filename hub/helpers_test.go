package hub

import (
	"context"
	"errors"
	"strconv"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
)

type echoIn struct {
	Text string `json:"text"`
	// Emit lets a test make the tool answer a given text, to drive the
	// sanitiser from a real tool. It is written with Go escapes (\x1b),
	// because the kit refuses control characters in arguments.
	Emit string `json:"emit,omitempty"`
	Fail string `json:"fail,omitempty"`
}

type echoOut struct {
	Text string `json:"text"`
	Seat string `json:"seat"`
	Kind string `json:"kind"`
	Op   string `json:"operator_id"`
	// Admin is the caller's administrator flag as the server received it.
	Admin bool `json:"admin,omitempty"`
}

// echoTool is a first-party tool that reports who called it.
func echoTool() servers.Tool {
	return servers.Typed("echo", "Echo text and the caller.", servers.Hints{ReadOnly: servers.No, Destructive: servers.No}, "thread",
		func(ctx context.Context, c authority.Caller, in echoIn) (echoOut, error) {
			switch in.Fail {
			case "conflict":
				return echoOut{}, authority.Refuse(authority.Conflict, "lost the race")
			case "internal":
				return echoOut{}, errors.New("store read broke")
			}
			text := in.Text
			if in.Emit != "" {
				var err error
				if text, err = strconv.Unquote(`"` + in.Emit + `"`); err != nil {
					return echoOut{}, err
				}
			}
			return echoOut{Text: text, Seat: c.Seat, Kind: string(c.Kind), Op: c.OperatorID, Admin: c.Admin}, nil
		})
}
