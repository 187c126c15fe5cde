package hubtest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Log is a JSON log a test reads while the hub writes it, to count its
// bytes or find an event in it.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// NewLog returns an empty log and a logger writing to it at level.
func NewLog(level slog.Level) (*Log, *slog.Logger) {
	l := &Log{}
	return l, slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: level}))
}

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Len is how many bytes were logged so far.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

// Lines are the logged lines that hold every one of the words.
func (l *Log) Lines(words ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}
