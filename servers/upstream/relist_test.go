package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 36 (finding 9), over streamable HTTP: a remote server that adds a
// tool and removes another while its session runs says so with
// notifications/tools/list_changed on the session's stream; the instance
// lists its tools again and hands the new list to OnTools, and a call to
// the added tool reaches the server.
func TestInstanceRelistsOnListChangedOverHTTP(t *testing.T) {
	r := startRemote(t, "127.0.0.1:0", false)
	mcp.AddTool(r.mcp, &mcp.Tool{Name: "stale", Description: "goes away"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: "stale"}, nil
		})
	lists := make(chan []string, 8)
	in, logs := startTest(t, Resolved{Name: "remote", Transport: TransportHTTP, URL: "http://" + r.addr + "/"}, func(o *Options) {
		o.OnTools = func(tools []Tool) {
			var names []string
			for _, tl := range tools {
				names = append(names, tl.Def.Name)
			}
			slices.Sort(names)
			lists <- names
		}
	})
	next := func(what string) []string {
		t.Helper()
		select {
		case l := <-lists:
			return l
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no tool list handed on; catalogue lines: %v", what, logs.events("server_catalogue_changed"))
			return nil
		}
	}
	if got := next("the first start"); !slices.Equal(got, []string{"echo", "stale"}) {
		t.Fatalf("first listing: %v", got)
	}
	mcp.AddTool(r.mcp, &mcp.Tool{Name: "fresh", Description: "added at runtime"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, textOut, error) {
			return nil, textOut{Text: "fresh"}, nil
		})
	r.mcp.RemoveTools("stale")
	// The SDK sends one notification per change, a moment apart or
	// folded into one: the list settles on the server's.
	for got := next("the runtime change"); !slices.Equal(got, []string{"echo", "fresh"}); got = next("the runtime change") {
		if !slices.Contains(got, "fresh") && !slices.Contains(got, "stale") {
			t.Fatalf("a listing between: %v", got)
		}
	}
	if text, err := callText(t, in, "fresh", `{}`); err != nil || !strings.Contains(text, "fresh") {
		t.Fatalf("the added tool: %q %v", text, err)
	}
	ev := logs.events("server_catalogue_changed")
	if len(ev) == 0 || !strings.Contains(fmt.Sprint(ev[len(ev)-1]["cause"]), "notifications/tools/list_changed") {
		t.Fatalf("no server_catalogue_changed naming the notification: %v", ev)
	}
}
