package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tapTransport keeps the raw annotations of every tools/list answer. The SDK
// decodes annotations into booleans, which turns an absent readOnlyHint into
// false; the hub must tell "the server said no" from "the server said
// nothing" (CAT-7), so it reads the wire.
type tapTransport struct {
	inner mcp.Transport
	raw   *rawAnnotations
	// link, if set, carries the hub's calls on the connection: it is
	// handed their answers, and is given the connection to write them on.
	link *sharedLink
	// notify says the connection's notifications are told here (stdio);
	// over HTTP the tap on the wire tells them (tapRT).
	notify bool
}

type rawAnnotations struct {
	// notify, if set, sees each notification from the server in wire
	// order, before the SDK queues it behind later responses.
	notify  func(method string, params json.RawMessage)
	mu      sync.Mutex
	pending map[string]bool // ids of tools/list requests awaiting an answer
	byTool  map[string]json.RawMessage
	// meta is the _meta members the SDK's client puts on every request
	// of a 2026-07-28 session, which the link's calls carry too.
	meta []byte
}

// noteRequest keeps the _meta of a request the SDK's client wrote, the
// first time one carries the protocol version in it.
func (r *rawAnnotations) noteRequest(params json.RawMessage) {
	if !bytes.Contains(params, []byte(`"io.modelcontextprotocol/protocolVersion"`)) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.meta == nil {
		r.meta = metaMembers(params)
	}
}

func (r *rawAnnotations) requestMeta() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.meta
}

func newRawAnnotations() *rawAnnotations {
	return &rawAnnotations{pending: map[string]bool{}, byTool: map[string]json.RawMessage{}}
}

// idKey spells a JSON-RPC id the same way whether it came from the SDK's
// decoded ID or from raw JSON.
func idKey(v any) string {
	switch x := v.(type) {
	case string:
		return "s:" + x
	case json.Number:
		return "n:" + x.String()
	case int64:
		return fmt.Sprintf("n:%d", x)
	case float64:
		return fmt.Sprintf("n:%v", x)
	}
	return ""
}

// waiting reports whether a tools/list answer is outstanding.
func (r *rawAnnotations) waiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) > 0
}

func (r *rawAnnotations) expect(id string) {
	if id == "" {
		return
	}
	r.mu.Lock()
	r.pending[id] = true
	r.mu.Unlock()
}

// answer records a tools/list result if id is one being waited for.
func (r *rawAnnotations) answer(id string, result json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pending[id] {
		return
	}
	delete(r.pending, id)
	var page struct {
		Tools []struct {
			Name        string          `json:"name"`
			Annotations json.RawMessage `json:"annotations"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &page) == nil {
		for _, tl := range page.Tools {
			r.byTool[tl.Name] = tl.Annotations
		}
	}
}

// get returns the annotations the server sent for a tool, raw; nil when it
// sent none.
func (r *rawAnnotations) get(tool string) json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byTool[tool]
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if t.link != nil {
		t.link.conn = c
	}
	return &tapConn{Connection: c, raw: t.raw, link: t.link, notify: t.notify}, nil
}

type tapConn struct {
	mcp.Connection
	raw    *rawAnnotations
	link   *sharedLink
	notify bool
}

func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.IsCall() {
		c.raw.expect(idKey(req.ID.Raw()))
		c.raw.noteRequest(req.Params)
	}
	return c.Connection.Write(ctx, msg)
}

// Read is the SDK's session reading the server, one message at a time in
// the order the server wrote them: the answer to a call of the hub's goes
// to that call, and everything else on to the session.
func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			if c.link != nil {
				c.link.fail()
			}
			return msg, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if c.link != nil && c.link.deliver(m) {
				continue
			}
			c.raw.answer(idKey(m.ID.Raw()), m.Result)
		case *jsonrpc.Request:
			// Told before the session queues it, so a call's log lines
			// and progress reach its client before its answer does.
			if !m.IsCall() && c.notify && c.raw.notify != nil {
				c.raw.notify(m.Method, m.Params)
			}
		}
		return msg, nil
	}
}

// tapRT does for HTTP what tapConn does for stdio. The streamable transport's
// connection cannot be wrapped (the SDK talks to it through unexported
// methods), so the tap sits on the wire instead: it notes the ids of
// tools/list requests in POST bodies, and reads answers out of JSON bodies
// and SSE streams as they pass, without holding them up.
type tapRT struct {
	base http.RoundTripper
	raw  *rawAnnotations
}

func (t tapRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// Most requests are tool calls: decode only one that can be a
		// tools/list.
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			for _, m := range jsonMessages(body) {
				if m.Method == "tools/list" {
					t.raw.expect(idKey(m.ID))
					t.raw.noteRequest(m.Params)
				}
			}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &sseTap{ReadCloser: resp.Body, raw: t.raw}
	case strings.HasPrefix(ct, "application/json") && t.raw.waiting():
		// A plain JSON body is one answer, which matters only while a
		// tools/list is waiting; notifications come on event streams.
		resp.Body = &jsonTap{ReadCloser: resp.Body, raw: t.raw}
	}
	return resp, nil
}

type wireMsg struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// jsonMessages decodes one JSON-RPC message or a batch; numbers stay as
// written so ids compare exactly.
func jsonMessages(b []byte) []wireMsg {
	b = bytes.TrimSpace(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if len(b) > 0 && b[0] == '[' {
		var batch []wireMsg
		if dec.Decode(&batch) == nil {
			return batch
		}
		return nil
	}
	var m wireMsg
	if dec.Decode(&m) != nil {
		return nil
	}
	return []wireMsg{m}
}

func (r *rawAnnotations) answerAll(b []byte) {
	for _, m := range jsonMessages(b) {
		switch {
		case m.Result != nil:
			r.answer(idKey(m.ID), m.Result)
		case m.ID == nil && m.Method != "" && r.notify != nil:
			r.notify(m.Method, m.Params)
		}
	}
}

// jsonTap keeps a JSON response body as it is read and looks into it at EOF.
type jsonTap struct {
	io.ReadCloser
	raw  *rawAnnotations
	buf  bytes.Buffer
	done bool
}

func (j *jsonTap) Read(p []byte) (int, error) {
	n, err := j.ReadCloser.Read(p)
	if !j.done {
		j.buf.Write(p[:n])
		if err == io.EOF {
			j.done = true
			j.raw.answerAll(j.buf.Bytes())
		}
	}
	return n, err
}

// sseTap reads SSE events out of a stream as it is read.
type sseTap struct {
	io.ReadCloser
	raw     *rawAnnotations
	pending []byte // bytes of an unfinished line
	data    bytes.Buffer
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.pending = append(s.pending, p[:n]...)
	for {
		i := bytes.IndexByte(s.pending, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(s.pending[:i]), "\r")
		s.pending = s.pending[i+1:]
		switch {
		case line == "":
			if s.data.Len() > 0 {
				s.raw.answerAll(s.data.Bytes())
				s.data.Reset()
			}
		case strings.HasPrefix(line, "data:"):
			if s.data.Len() > 0 {
				s.data.WriteByte('\n')
			}
			s.data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return n, err
}
