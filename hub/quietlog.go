package hub

import (
	"context"
	"log/slog"
)

// quiet is the SDK's logger: it reports session comings and goings at info
// level, three lines for every stateless request, so below warnings it
// speaks only when the hub runs with debug logging.
func quiet(l *slog.Logger) *slog.Logger {
	if l.Enabled(context.Background(), slog.LevelDebug) {
		return l
	}
	return slog.New(minLevel{Handler: l.Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: m.Handler.WithAttrs(a), min: m.min}
}

func (m minLevel) WithGroup(g string) slog.Handler {
	return minLevel{Handler: m.Handler.WithGroup(g), min: m.min}
}
