package hub

import (
	"context"
	"log/slog"
	"strings"
)

// quiet is the SDK's logger: it reports session comings and goings at info
// level, three lines for every stateless request, so below warnings it
// speaks only when the hub runs with debug logging.
//
// It also lowers to debug the warning the SDK logs for each session it
// could not tell of a catalogue change because nobody is listening on
// it: a client that went away without ending its session is not the hub's
// fault, and with thousands of such sessions one change logged thousands
// of warnings. Such sessions are closed once idle (Options.SessionIdle).
func quiet(l *slog.Logger) *slog.Logger {
	min := slog.LevelWarn
	if l.Enabled(context.Background(), slog.LevelDebug) {
		min = slog.LevelDebug
	}
	return slog.New(minLevel{Handler: l.Handler(), min: min})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && undelivered(r.Message) {
		if !m.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return m.Handler.Handle(ctx, r)
}

// undelivered reports the SDK's word that a notification found no stream
// to go out on.
func undelivered(msg string) bool {
	return strings.HasPrefix(msg, "calling notifications/") && strings.Contains(msg, "rejected by transport")
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: m.Handler.WithAttrs(a), min: m.min}
}

func (m minLevel) WithGroup(g string) slog.Handler {
	return minLevel{Handler: m.Handler.WithGroup(g), min: m.min}
}
