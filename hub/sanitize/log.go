package sanitize

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
)

// RedactSecrets replaces every configured secret value in s with Redacted
// and changes nothing else: no control character is stripped, no binary is
// refused, and no credential shape is guessed at. It is for the hub's own
// log, whose handler escapes what it writes, and where a guessed shape
// ("invalid token: expired") is more often the cause an operator is
// reading than a credential.
func (s *Sanitizer) RedactSecrets(in string) string {
	return redactSecrets(in, s.loadSecrets())
}

func redactSecrets(in string, set *secretSet) string {
	if len(set.anchors) == 0 && len(set.long) == 0 {
		return in
	}
	var spans []span
	for lo := 0; lo < len(in); lo += chunkSize {
		spans = findSecrets(in, lo, min(lo+chunkSize, len(in)), set, spans)
	}
	if len(spans) == 0 {
		return in
	}
	return replaceSpans(in, spans)
}

// NewLogHandler wraps a log handler so that no configured secret reaches
// it: the message and every string in a record's attributes are redacted
// (RedactSecrets), at any depth of groups, errors and other values
// included. Attributes given to With are held back and redacted with each
// record rather than formatted once, so a secret that s learns later (a
// reload, a rotated credential) is redacted from loggers made before it.
//
// The hub installs it where its logger is built, fed by the same Sanitizer
// that redacts tool results, so a third-party server that prints a
// credential it was given on its stderr does not put it in the hub's log.
func NewLogHandler(inner slog.Handler, s *Sanitizer) slog.Handler {
	return &logHandler{inner: inner, s: s}
}

type logHandler struct {
	inner slog.Handler
	s     *Sanitizer
	// with is what WithGroup and WithAttrs added, in order.
	with []groupOrAttrs
}

// groupOrAttrs is one WithGroup (group set) or one WithAttrs.
type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.add(groupOrAttrs{group: name})
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.add(groupOrAttrs{attrs: attrs})
}

func (h *logHandler) add(g groupOrAttrs) *logHandler {
	out := &logHandler{inner: h.inner, s: h.s, with: make([]groupOrAttrs, 0, len(h.with)+1)}
	out.with = append(append(out.with, h.with...), g)
	return out
}

// Handle redacts the record and what With added, and hands the inner
// handler one record holding all of it, nested in the groups WithGroup
// opened, as the inner handler would have nested it itself.
func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	set := h.s.loadSecrets()
	out := slog.NewRecord(r.Time, r.Level, redactSecrets(r.Message, set), r.PC)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, redactAttr(a, set))
		return true
	})
	for i := len(h.with) - 1; i >= 0; i-- {
		g := h.with[i]
		if g.group != "" {
			// An empty group is left out, as slog's own handlers do.
			if len(attrs) > 0 {
				attrs = []slog.Attr{{Key: g.group, Value: slog.GroupValue(attrs...)}}
			}
			continue
		}
		level := make([]slog.Attr, 0, len(g.attrs)+len(attrs))
		for _, a := range g.attrs {
			level = append(level, redactAttr(a, set))
		}
		attrs = append(level, attrs...)
	}
	out.AddAttrs(attrs...)
	return h.inner.Handle(ctx, out)
}

func redactAttr(a slog.Attr, set *secretSet) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		v = slog.StringValue(redactSecrets(v.String(), set))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = redactAttr(ga, set)
		}
		v = slog.GroupValue(out...)
	case slog.KindAny:
		v = redactAny(v, set)
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// redactAny redacts a value of any other type as the JSON handler would
// write it: an error by its message, a list of strings string by string,
// anything else by its JSON. A value in which nothing was redacted is kept
// as it was; one in which something was is written as the redacted text.
func redactAny(v slog.Value, set *secretSet) slog.Value {
	switch x := v.Any().(type) {
	case error:
		msg := x.Error()
		if red := redactSecrets(msg, set); red != msg {
			return slog.StringValue(red)
		}
		return v
	case []string:
		out := make([]string, len(x))
		changed := false
		for i, s := range x {
			out[i] = redactSecrets(s, set)
			changed = changed || out[i] != s
		}
		if !changed {
			return v
		}
		return slog.AnyValue(out)
	}
	var text string
	if b, err := json.Marshal(v.Any()); err == nil {
		text = string(b)
	} else {
		text = fmt.Sprintf("%+v", v.Any())
	}
	if red := redactSecrets(text, set); red != text {
		return slog.StringValue(red)
	}
	return v
}
