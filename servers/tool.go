package servers

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/crewlet/hub/authority"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/segmentio/encoding/json"
)

// Handler is a typed tool body. It receives the verified caller and decoded,
// schema-checked arguments. It returns its output, or an error: an
// *authority.Refusal anywhere in the chain is answered as that refusal, and
// any other error is the node's own fault (internal_error, cause logged).
type Handler[In, Out any] func(ctx context.Context, c authority.Caller, in In) (Out, error)

// Tool is one row of a server's tool table: everything a reader of the
// catalogue needs (name, hints, where it delivers) beside the body. Servers
// declare their tools as a []Tool and register the table in one call.
type Tool struct {
	Name        string
	Description string
	Hints       Hints
	// Delivers names where a call puts something in front of somebody
	// outside the turn (CAT-8); empty for a tool that reaches nobody.
	Delivers string
	// OperatorOnly marks a tool people reach on the operator surface and no
	// seat is offered (TRK-6, OPS-3). It travels in the listing's _meta, so
	// the hub can keep it out of every seat's registry; the tool still
	// decides its own authority on each call.
	OperatorOnly bool

	build func(self Tool, t Trust, log *slog.Logger) (*mcp.Tool, mcp.ToolHandler, error)
}

// ForOperators returns the row marked operator-only.
func (t Tool) ForOperators() Tool {
	t.OperatorOnly = true
	return t
}

// Typed declares a tool whose input schema comes from In and whose output is
// an Out, marshalled as JSON.
func Typed[In, Out any](name, description string, hints Hints, delivers string, h Handler[In, Out]) Tool {
	tool := Tool{Name: name, Description: description, Hints: hints, Delivers: delivers}
	tool.build = func(self Tool, trust Trust, log *slog.Logger) (*mcp.Tool, mcp.ToolHandler, error) {
		in, err := jsonschema.For[In](nil)
		if err != nil {
			return nil, nil, fmt.Errorf("tool %s: input schema: %w", name, err)
		}
		resolved, err := in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			return nil, nil, fmt.Errorf("tool %s: input schema: %w", name, err)
		}
		defaults := declaresDefaults(in)
		// The input schema is advertised in the spelling every client
		// maps (portableSchema); arguments are checked against the inferred
		// one, which takes the same values and refuses them in one line.
		// No output schema is advertised: clients (the TypeScript SDK among
		// them) check structured content against it even on a failed
		// result, and a refusal's structured content is its class, not the
		// tool's output. Success still carries the output as structured
		// content and as JSON text.
		def := &mcp.Tool{
			Name:        name,
			Description: description,
			InputSchema: portableSchema(in),
			Annotations: Annotations(hints),
			Meta:        mcp.Meta{MetaHints: hints, MetaDelivers: delivers},
		}
		if self.OperatorOnly {
			def.Meta[MetaAudience] = AudienceOperator
		}
		handler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			caller, err := trust.Caller(req)
			if err != nil {
				return Refused(authority.AsRefusal(err)), nil
			}
			var args In
			if r := decodeArgs(req.Params.Arguments, resolved, defaults, &args); r != nil {
				return Refused(r), nil
			}
			res, err := h(ctx, caller, args)
			if err != nil {
				r := authority.AsRefusal(err)
				if r.Class == authority.InternalError {
					log.ErrorContext(ctx, "tool_failed", "tool", name, "seat", caller.Seat, "error", err.Error())
				}
				return Refused(r), nil
			}
			// segmentio's Marshal writes what encoding/json would (HTML
			// escaped, map keys sorted) at about half its CPU: every
			// first-party answer is marshalled here.
			body, err := json.Marshal(res)
			if err != nil {
				log.ErrorContext(ctx, "tool_failed", "tool", name, "error", fmt.Sprintf("marshal output: %v", err))
				return Refused(authority.Internal()), nil
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: string(body)}},
				StructuredContent: json.RawMessage(body),
			}, nil
		}
		return def, handler, nil
	}
	return tool
}

// Annotations renders hints in the protocol's vocabulary. The protocol has no
// "unknown": an unknown destructive or open-world hint is left out, and an
// unknown read-only or idempotent hint can only be written as false, which is
// why the exact values also travel in MetaHints.
func Annotations(h Hints) *mcp.ToolAnnotations {
	ptr := func(t Tri) *bool {
		if t == Unknown {
			return nil
		}
		b := t == Yes
		return &b
	}
	return &mcp.ToolAnnotations{
		ReadOnlyHint:    h.ReadOnly == Yes,
		IdempotentHint:  h.Idempotent == Yes,
		DestructiveHint: ptr(h.Destructive),
		OpenWorldHint:   ptr(h.OpenWorld),
	}
}

// Register adds every tool of a table to a server. A duplicate name in one
// table is a programming error and panics at start-up rather than letting the
// later entry shadow the earlier one. Under an in-process trust (InProcess)
// each handler is also filed for a direct call.
func Register(s *mcp.Server, trust Trust, log *slog.Logger, tools ...Tool) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for _, t := range tools {
		if seen[t.Name] {
			panic("servers: tool " + t.Name + " declared twice")
		}
		seen[t.Name] = true
		def, h, err := t.build(t, trust, log)
		if err != nil {
			panic("servers: " + err.Error())
		}
		s.AddTool(def, h)
		if trust.direct != nil {
			trust.direct.add(t.Name, h)
		}
	}
}
