// Package modeltest runs fake model servers for tests: real HTTP servers
// on loopback that speak the chat-completions API (streaming too, when the
// client asks) and the Messages API as the vendors' own SDKs call them,
// answering each request from a script with text and tool calls.
//
// Ownership: a Server is closed by the test's cleanup; requests held by a
// script (Reply.Hold) are released when the server closes.
package modeltest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Conversation is one request as the fake read it, the same for both
// APIs.
type Conversation struct {
	API      string // openai or anthropic
	Model    string
	System   string
	Messages []Message
	// Tools are the names of the tools offered, in order; Schemas their
	// argument schemas.
	Tools   []string
	Schemas map[string]json.RawMessage
	Stream  bool
	Header  http.Header
}

// Message is one message of a conversation.
type Message struct {
	Role    string // user, assistant, tool
	Text    string
	Calls   []Call
	Results []Result
}

// Call is a tool call, as scripted or as sent back by the client.
type Call struct {
	ID   string
	Name string
	Args any
}

// Result is a tool result the client sent back.
type Result struct {
	CallID  string
	Text    string
	IsError bool
}

// Round is how many answers of the model the conversation already holds:
// 0 for the first request of a turn.
func (c Conversation) Round() int {
	n := 0
	for _, m := range c.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// Results lists every tool result in the conversation, in order.
func (c Conversation) Results() []Result {
	var out []Result
	for _, m := range c.Messages {
		out = append(out, m.Results...)
	}
	return out
}

// LastResults are the results of the newest round of calls.
func (c Conversation) LastResults() []Result {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if len(c.Messages[i].Results) > 0 {
			return c.Messages[i].Results
		}
		if c.Messages[i].Role == "assistant" {
			return nil
		}
	}
	return nil
}

// UserText joins every user message's text.
func (c Conversation) UserText() string {
	var b strings.Builder
	for _, m := range c.Messages {
		if m.Role == "user" && m.Text != "" {
			b.WriteString(m.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Offers reports whether a tool was offered.
func (c Conversation) Offers(tool string) bool {
	for _, t := range c.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// Reply is what the script answers one request with.
type Reply struct {
	Text  string
	Calls []Call
	// Usage reported; zero fields report zero, which the client estimates.
	Input, Output int64
	// Hold, if set, keeps the request open until it is closed (or the
	// client or server goes away): a model mid-answer.
	Hold <-chan struct{}
	// Status, if set, answers an HTTP error with this status instead.
	Status int
	// Message is what an error status says; by default "scripted failure"
	// and the status.
	Message string
}

// Script answers a request.
type Script func(Conversation) Reply

// Steps answers the nth model round with the nth reply, and the last one
// for every round after it: the same script answers a re-run turn the
// same way.
func Steps(replies ...Reply) Script {
	return func(c Conversation) Reply {
		return replies[min(c.Round(), len(replies)-1)]
	}
}

// Server is a fake model server.
type Server struct {
	srv    *httptest.Server
	script Script
	closed chan struct{}
	once   sync.Once

	mu       sync.Mutex
	requests []Conversation
	calls    int
	// arrived is closed and replaced on every request, so WaitFor sleeps
	// until something changes.
	arrived chan struct{}
}

// Start runs a fake server speaking both APIs: the chat-completions API
// under /v1 (its base URL is URL()+"/v1") and the Messages API (its base
// URL is URL()).
func Start(t testing.TB, script Script) *Server {
	s := &Server{script: script, closed: make(chan struct{}), arrived: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/messages", s.messages)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// Close releases held requests and stops the server; safe twice.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// URL is the server's root.
func (s *Server) URL() string { return s.srv.URL }

// OpenAIBase is the base URL an openai provider is given.
func (s *Server) OpenAIBase() string { return s.srv.URL + "/v1" }

// Requests is every request answered or being answered, in arrival
// order.
func (s *Server) Requests() []Conversation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Conversation(nil), s.requests...)
}

// Count is how many requests arrived.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *Server) record(c Conversation) {
	s.mu.Lock()
	s.requests = append(s.requests, c)
	s.calls++
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.mu.Unlock()
}

// WaitFor returns once n requests have arrived, or with ctx's error.
func (s *Server) WaitFor(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, next := s.calls, s.arrived
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return fmt.Errorf("modeltest: %d of %d requests arrived: %w", got, n, ctx.Err())
		}
	}
}

// answer runs the script and waits out a hold; false when the request
// should be dropped.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, c Conversation) (Reply, bool) {
	s.record(c)
	rep := s.script(c)
	if rep.Hold != nil {
		select {
		case <-rep.Hold:
		case <-r.Context().Done():
			return rep, false
		case <-s.closed:
			return rep, false
		}
	}
	if rep.Status != 0 {
		msg := rep.Message
		if msg == "" {
			msg = fmt.Sprintf("scripted failure %d", rep.Status)
		}
		body, _ := json.Marshal(map[string]any{"error": map[string]string{"message": msg, "type": "server_error"}})
		http.Error(w, string(body), rep.Status)
		return rep, false
	}
	return rep, true
}

func argsJSON(a any) string {
	switch v := a.(type) {
	case nil:
		return "{}"
	case string:
		return v
	case json.RawMessage:
		return string(v)
	}
	b, _ := json.Marshal(a)
	return string(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// textOf reads content that is a string or an array of text parts.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}
