package sanitize

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

const logSecret = "log-secret-value-2718"

// plainAndRedacted logs the same calls through a plain JSON handler and
// through NewLogHandler over one, with time left out so the two compare.
func plainAndRedacted(s *Sanitizer, calls func(*slog.Logger)) (plain, redacted string) {
	noTime := &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	var p, r bytes.Buffer
	calls(slog.New(slog.NewJSONHandler(&p, noTime)))
	calls(slog.New(NewLogHandler(slog.NewJSONHandler(&r, noTime), s)))
	return p.String(), r.String()
}

type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue("lazy " + logSecret) }

// Every place a record can carry a string, With attributes, groups opened
// with WithGroup, nested groups, errors, string lists and lazy values
// included, loses the secret and keeps its shape: the redacted log is the
// plain log with the value replaced.
func TestLogHandlerRedactsEveryString(t *testing.T) {
	calls := func(l *slog.Logger) {
		l = l.With("server", "leaky", "cmd", "run --token "+logSecret)
		l.Info("said "+logSecret, "line", "my token is "+logSecret, "n", 3)
		g := l.WithGroup("child").With("seat", logSecret)
		g.Error("server_exited", "stderr_tail", "a\n"+logSecret+"\nb",
			slog.Group("inner", "v", logSecret, "ok", true),
			"err", errors.New("dial "+logSecret+": refused"),
			"keys", []string{"A", logSecret},
			"lazy", valuer{})
		l.WithGroup("empty").Debug("nothing in the group")
	}
	s := New()
	plain, redacted := plainAndRedacted(s, calls)
	if plain != redacted {
		t.Fatalf("with no secret configured the log changed:\nplain    %s\nredacted %s", plain, redacted)
	}
	// Set after the loggers of calls are made: With attributes are
	// redacted when a record is written, not when they were added.
	s.SetSecrets([]string{logSecret})
	plain, redacted = plainAndRedacted(s, calls)
	if want := strings.ReplaceAll(plain, logSecret, Redacted); redacted != want {
		t.Fatalf("redacted log\n got %s\nwant %s", redacted, want)
	}
	if !strings.Contains(plain, logSecret) || strings.Contains(redacted, logSecret) {
		t.Fatalf("the secret is still in the log:\n%s", redacted)
	}
}

// A value of any other type is redacted as the JSON handler would write
// it; one that needed nothing keeps its JSON shape.
func TestLogHandlerRedactsOtherValues(t *testing.T) {
	type payload struct {
		Name, Token string
	}
	s := New(logSecret)
	var buf bytes.Buffer
	l := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil), s))
	l.Info("m", "p", payload{"a", logSecret}, "clean", payload{"b", "c"}, "m", map[string]any{"k": []any{logSecret}})
	out := buf.String()
	if strings.Contains(out, logSecret) || !strings.Contains(out, `"clean":{"Name":"b","Token":"c"}`) ||
		!strings.Contains(out, `"p":"{\"Name\":\"a\",\"Token\":\"[REDACTED]\"}"`) {
		t.Fatalf("log %s", out)
	}
}

// Only configured values: a credential shape is left alone in the log,
// where "invalid token: expired" is the cause an operator is reading.
func TestRedactSecretsLeavesShapes(t *testing.T) {
	s := New(logSecret)
	in := "invalid token: expired; Authorization: Bearer abcdefghijkl; " + logSecret + "\x1b[31m"
	want := "invalid token: expired; Authorization: Bearer abcdefghijkl; [REDACTED]\x1b[31m"
	if got := s.RedactSecrets(in); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := New().RedactSecrets(in); got != in {
		t.Fatalf("no secrets: %q", got)
	}
}

func TestLogHandlerEnabledFollowsInner(t *testing.T) {
	h := NewLogHandler(slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}), New())
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("Enabled does not follow the wrapped handler")
	}
}

// A configured value too long to be found by its anchor byte (a private
// key, a long token) is redacted from the log too, also when it is the
// only value configured.
func TestRedactSecretsFindsLongValues(t *testing.T) {
	long := strings.Repeat("k3y-material-", 10) // past maxAnchored
	if len(long) <= maxAnchored {
		t.Fatalf("the value is %d bytes, not past %d", len(long), maxAnchored)
	}
	in := "loaded " + long + " from the store"
	want := "loaded " + Redacted + " from the store"
	if got := New(long).RedactSecrets(in); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
