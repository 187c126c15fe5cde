package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The chat-completions API: POST /v1/chat/completions, answered whole or,
// with "stream": true, as server-sent chunks ending in [DONE].

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	c := Conversation{API: "openai", Model: req.Model, Stream: req.Stream, Header: r.Header.Clone(), Schemas: map[string]json.RawMessage{}}
	for _, t := range req.Tools {
		c.Tools = append(c.Tools, t.Function.Name)
		c.Schemas[t.Function.Name] = t.Function.Parameters
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			c.System += textOf(m.Content)
		case "tool":
			res := Result{CallID: m.ToolCallID, Text: textOf(m.Content)}
			// Results of one round arrive as consecutive tool messages.
			if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == "tool" {
				c.Messages[n-1].Results = append(c.Messages[n-1].Results, res)
			} else {
				c.Messages = append(c.Messages, Message{Role: "tool", Results: []Result{res}})
			}
		default:
			msg := Message{Role: m.Role, Text: textOf(m.Content)}
			for _, tc := range m.ToolCalls {
				msg.Calls = append(msg.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(tc.Function.Arguments)})
			}
			c.Messages = append(c.Messages, msg)
		}
	}
	rep, ok := s.answer(w, r, c)
	if !ok {
		return
	}
	id := fmt.Sprintf("chatcmpl-%d", s.Count())
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	calls := make([]call, 0, len(rep.Calls))
	for i, cl := range rep.Calls {
		cid := cl.ID
		if cid == "" {
			cid = fmt.Sprintf("call_%d_%d", s.Count(), i)
		}
		calls = append(calls, call{Index: i, ID: cid, Type: "function", Function: fn{cl.Name, argsJSON(cl.Args)}})
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	usage := map[string]int64{"prompt_tokens": rep.Input, "completion_tokens": rep.Output, "total_tokens": rep.Input + rep.Output}
	created := time.Now().Unix()
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.Text}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		writeJSON(w, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finishReason any) {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	// The text in two pieces and each call's arguments in two, as a real
	// server streams them, so a client that does not accumulate fails.
	if rep.Text != "" {
		half := len(rep.Text) / 2
		chunk(map[string]any{"content": rep.Text[:half]}, nil)
		chunk(map[string]any{"content": rep.Text[half:]}, nil)
	}
	for _, cl := range calls {
		half := len(cl.Function.Arguments) / 2
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": cl.Index, "id": cl.ID, "type": "function",
			"function": map[string]any{"name": cl.Function.Name, "arguments": cl.Function.Arguments[:half]}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": cl.Index,
			"function": map[string]any{"arguments": cl.Function.Arguments[half:]}}}}, nil)
	}
	chunk(map[string]any{}, finish)
	if req.StreamOptions.IncludeUsage {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{}, "usage": usage})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}
