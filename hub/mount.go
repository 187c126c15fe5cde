package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mounted is a first-party server the hub runs in-process, reached over the
// SDK's in-memory transport so it behaves exactly as it does standalone.
type mounted struct {
	name    string
	proof   string
	server  *mcp.ServerSession
	session *mcp.ClientSession
}

// mount connects a first-party server in-process and lists its tools as
// builtin entries.
func mount(ctx context.Context, name string, build func(servers.Trust) *mcp.Server) (*mounted, []Entry, error) {
	trust, proof := servers.InProcessTrust()
	srv := build(trust)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("mount %s: %w", name, err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "crewlet", Version: Version}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, nil, fmt.Errorf("mount %s: %w", name, err)
	}
	m := &mounted{name: name, proof: proof, server: ss, session: cs}
	var entries []Entry
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("mount %s: list tools: %w", name, err)
		}
		e, err := entryFromTool(tool, SourceBuiltin, "", m)
		if err != nil {
			m.Close()
			return nil, nil, fmt.Errorf("mount %s: %w", name, err)
		}
		entries = append(entries, e)
	}
	return m, entries, nil
}

// entryFromTool files a listed tool. A first-party tool states its exact
// hints and delivers in _meta; otherwise hints are read from the raw
// annotations, so an absent hint stays unknown.
func entryFromTool(t *mcp.Tool, src Source, prefix string, b Backend) (Entry, error) {
	in, err := json.Marshal(t.InputSchema)
	if err != nil {
		return Entry{}, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	e := Entry{
		Name:        prefix + t.Name,
		Source:      src,
		Description: t.Description,
		InputSchema: in,
		upstream:    t.Name,
		backend:     b,
	}
	if t.OutputSchema != nil {
		if e.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return Entry{}, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
		}
	}
	if raw, ok := t.Meta[servers.MetaHints]; ok {
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &e.Hints); err != nil {
			return Entry{}, fmt.Errorf("tool %s: hints: %w", t.Name, err)
		}
	} else if t.Annotations != nil {
		raw, _ := json.Marshal(t.Annotations)
		e.Hints = servers.HintsFromAnnotations(raw)
	}
	if d, ok := t.Meta[servers.MetaDelivers].(string); ok {
		e.Delivers = d
	}
	e.OperatorOnly = t.Meta[servers.MetaAudience] == servers.AudienceOperator
	return e, nil
}

// Call implements Backend.
func (m *mounted) Call(ctx context.Context, caller authority.Caller, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	var a any
	if len(args) > 0 {
		a = args
	}
	return m.session.CallTool(ctx, &mcp.CallToolParams{
		Name:      tool,
		Arguments: a,
		Meta:      servers.CallerMeta(caller, m.proof),
	})
}

// Close ends the in-process session; safe to call twice.
func (m *mounted) Close() error {
	err := m.session.Close()
	m.server.Wait()
	return err
}
