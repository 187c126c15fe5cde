//lint:file-ignore SA1019 logging and sampling are deprecated in 2026-07-28 (SEP-2577), but a hub still passes them on for the session revisions.

package sanitize

import (
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a third-party server sends a client while serving a call (log
// lines, progress, sampling and elicitation requests) reaches the client as
// surely as the call's result, so it passes the same rules (OUT-1): each
// piece of text in it has control characters stripped and secrets
// redacted, binary posing as text is refused, and _meta keys that would
// read as the hub's are renamed (ForeignMetaKey). Protocol state the
// client matches on passes as it came: a progress token (the client's own)
// and an elicitation's id.
//
// Each method answers a sanitised copy and never changes p, or an error
// (and nothing) when p holds binary data, which the caller drops or
// refuses rather than pass on part of.

// binaryIn names what held binary data in the error *err, if it is a
// BinaryError: a message, not a tool's result.
func binaryIn(what string, err *error) {
	var berr *BinaryError
	if errors.As(*err, &berr) {
		berr.Of = what
	}
}

// foreignWalker walks one message a third-party server sent, under one
// secret set.
func (s *Sanitizer) foreignWalker() *decWalker {
	return &decWalker{s: s, set: s.loadSecrets(), foreign: true}
}

// LogMessage sanitises a server's log notification: its data (of any JSON
// shape), its logger's name and its _meta.
func (s *Sanitizer) LogMessage(p *mcp.LoggingMessageParams) (_ *mcp.LoggingMessageParams, err error) {
	defer binaryIn("the server's log message", &err)
	if p == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *p
	// The level is the protocol's word, but the server wrote it: a value
	// none of the protocol's is text like any other.
	level, err := w.text("its level", string(p.Level))
	if err != nil {
		return nil, err
	}
	out.Level = mcp.LoggingLevel(level)
	if out.Logger, err = w.text("its logger name", p.Logger); err != nil {
		return nil, err
	}
	if out.Data, err = w.structured("its data", p.Data); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("its _meta", p.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// Progress sanitises a server's progress notification: its message and its
// _meta.
func (s *Sanitizer) Progress(p *mcp.ProgressNotificationParams) (_ *mcp.ProgressNotificationParams, err error) {
	defer binaryIn("the server's progress notification", &err)
	if p == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *p
	if out.Message, err = w.text("its message", p.Message); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("its _meta", p.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateMessage sanitises a server's sampling request: its messages'
// content (as a result's content is; images and audio are binary by type),
// the system prompt, stop sequences, model hints, metadata and _meta.
func (s *Sanitizer) CreateMessage(p *mcp.CreateMessageParams) (_ *mcp.CreateMessageParams, err error) {
	defer binaryIn("the server's sampling request", &err)
	if p == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *p
	if p.Messages != nil {
		out.Messages = make([]*mcp.SamplingMessage, len(p.Messages))
		for i, m := range p.Messages {
			if m == nil {
				continue
			}
			nm := *m
			if nm.Content, err = w.samplingContent(i, m.Content); err != nil {
				return nil, err
			}
			out.Messages[i] = &nm
		}
	}
	if out.SystemPrompt, err = w.text("its system prompt", p.SystemPrompt); err != nil {
		return nil, err
	}
	if p.StopSequences != nil {
		out.StopSequences = slices.Clone(p.StopSequences)
		for i, seq := range p.StopSequences {
			if out.StopSequences[i], err = w.text("a stop sequence", seq); err != nil {
				return nil, err
			}
		}
	}
	if p.ModelPreferences != nil {
		mp := *p.ModelPreferences
		mp.Hints = make([]*mcp.ModelHint, len(p.ModelPreferences.Hints))
		for i, h := range p.ModelPreferences.Hints {
			if h == nil {
				continue
			}
			nh := *h
			if nh.Name, err = w.text("a model hint", h.Name); err != nil {
				return nil, err
			}
			mp.Hints[i] = &nh
		}
		if p.ModelPreferences.Hints == nil {
			mp.Hints = nil
		}
		out.ModelPreferences = &mp
	}
	if out.Metadata, err = w.structured("its metadata", p.Metadata); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("its _meta", p.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}

// samplingContent sanitises the content of sampling message i: what a
// result may hold, as a result's content is, and the tool use and tool
// results a sampling message may also carry.
func (w *decWalker) samplingContent(i int, c mcp.Content) (mcp.Content, error) {
	var err error
	switch c := c.(type) {
	case *mcp.ToolUseContent:
		if c == nil {
			return c, nil
		}
		n := *c
		where := fmt.Sprintf("the tool use of message %d", i)
		if n.Name, err = w.text(where, c.Name); err != nil {
			return nil, err
		}
		input, err := w.structured(where, c.Input)
		if err != nil {
			return nil, err
		}
		if c.Input != nil {
			n.Input, _ = input.(map[string]any)
		}
		if n.Meta, err = w.meta("the _meta of "+where, c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	case *mcp.ToolResultContent:
		if c == nil {
			return c, nil
		}
		n := *c
		if c.Content != nil {
			n.Content = make([]mcp.Content, len(c.Content))
			for j, item := range c.Content {
				if n.Content[j], err = w.content(j, item); err != nil {
					return nil, err
				}
			}
		}
		where := fmt.Sprintf("the tool result of message %d", i)
		if n.StructuredContent, err = w.structured(where, c.StructuredContent); err != nil {
			return nil, err
		}
		if n.Meta, err = w.meta("the _meta of "+where, c.Meta); err != nil {
			return nil, err
		}
		return &n, nil
	}
	return w.content(i, c)
}

// Elicit sanitises a server's elicitation request: the message shown to
// the person, the URL of a url elicitation, the schema asked for (titles,
// descriptions, defaults) and _meta.
func (s *Sanitizer) Elicit(p *mcp.ElicitParams) (_ *mcp.ElicitParams, err error) {
	defer binaryIn("the server's elicitation request", &err)
	if p == nil {
		return nil, nil
	}
	w := s.foreignWalker()
	out := *p
	if out.Mode, err = w.text("its mode", p.Mode); err != nil {
		return nil, err
	}
	if out.Message, err = w.text("its message", p.Message); err != nil {
		return nil, err
	}
	if out.URL, err = w.text("its URL", p.URL); err != nil {
		return nil, err
	}
	if out.RequestedSchema, err = w.structured("its requested schema", p.RequestedSchema); err != nil {
		return nil, err
	}
	if out.Meta, err = w.meta("its _meta", p.Meta); err != nil {
		return nil, err
	}
	return &out, nil
}
