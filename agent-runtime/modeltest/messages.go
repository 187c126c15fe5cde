package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The Messages API: POST /v1/messages, answered whole or, with
// "stream": true, as its server-sent events.

type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int64           `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	if req.MaxTokens <= 0 {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`, http.StatusBadRequest)
		return
	}
	c := Conversation{API: "anthropic", Model: req.Model, Stream: req.Stream, Header: r.Header.Clone(), System: textOf(req.System),
		Schemas: map[string]json.RawMessage{}}
	for _, t := range req.Tools {
		c.Tools = append(c.Tools, t.Name)
		c.Schemas[t.Name] = t.InputSchema
	}
	for _, m := range req.Messages {
		var blocks []block
		if json.Unmarshal(m.Content, &blocks) != nil {
			c.Messages = append(c.Messages, Message{Role: m.Role, Text: textOf(m.Content)})
			continue
		}
		msg := Message{Role: m.Role}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if msg.Text != "" {
					msg.Text += "\n"
				}
				msg.Text += b.Text
			case "tool_use":
				msg.Calls = append(msg.Calls, Call{ID: b.ID, Name: b.Name, Args: b.Input})
			case "tool_result":
				msg.Role = "tool"
				msg.Results = append(msg.Results, Result{CallID: b.ToolUseID, Text: textOf(b.Content), IsError: b.IsError})
			}
		}
		c.Messages = append(c.Messages, msg)
	}
	rep, ok := s.answer(w, r, c)
	if !ok {
		return
	}
	id := fmt.Sprintf("msg_%d", s.Count())
	var content []map[string]any
	if rep.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	for i, cl := range rep.Calls {
		cid := cl.ID
		if cid == "" {
			cid = fmt.Sprintf("toolu_%d_%d", s.Count(), i)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": cid, "name": cl.Name, "input": json.RawMessage(argsJSON(cl.Args))})
	}
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": rep.Input, "output_tokens": rep.Output}
	if !req.Stream {
		if content == nil {
			content = []map[string]any{}
		}
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	event := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.Input, "output_tokens": 0}}})
	for i, b := range content {
		start := map[string]any{}
		for k, v := range b {
			start[k] = v
		}
		var delta map[string]any
		if b["type"] == "text" {
			start["text"] = ""
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		} else {
			start["input"] = map[string]any{}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(b["input"].(json.RawMessage))}
		}
		event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.Output}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
