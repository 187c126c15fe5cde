package hubtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Log is a JSON log a hub writes to from many goroutines, for a test that
// reads what was logged (or checks what never was).
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewLog returns a logger at debug level writing to a new Log.
func NewLog() (*slog.Logger, *Log) {
	l := &Log{}
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})), l
}

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
