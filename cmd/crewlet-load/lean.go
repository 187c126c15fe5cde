package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/segmentio/encoding/json"
)

// Clients a row's calls can be made with.
//
// The go-sdk client reads each answer three times (a nesting-depth scan of
// the whole message, the JSON-RPC envelope, then the result with its
// structured content built as maps), which on a page of fifty work items
// costs about twice what the hub spends serving it; on two cores the load
// generator then measures itself. The lean client makes the same requests
// a go-sdk client makes, on a session the go-sdk client opened, and reads
// each answer once into the few fields a check needs, so a row measures the
// server rather than the client.
const (
	clientSDK  = "go-sdk"
	clientLean = "lean"
)

// answer is a tool result as a row's check sees it, whichever client read it.
type answer struct {
	isError bool
	content []contentItem
	// items is how many items the structured content lists under "items";
	// -1 when it lists none.
	items int
}

type contentItem struct {
	kind, text string
}

// answerOf is a go-sdk result as an answer.
func answerOf(res *mcp.CallToolResult) answer {
	a := answer{isError: res.IsError, items: -1}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			a.content = append(a.content, contentItem{"text", tc.Text})
		} else {
			a.content = append(a.content, contentItem{kind: "other"})
		}
	}
	if m, ok := res.StructuredContent.(map[string]any); ok {
		if items, ok := m["items"].([]any); ok {
			a.items = len(items)
		}
	}
	return a
}

// text is the answer's text content, for an error message.
func (a answer) text() string {
	var b strings.Builder
	for _, c := range a.content {
		b.WriteString(c.text)
	}
	return b.String()
}

// caller is one client session making a row's calls, one at a time.
type caller interface {
	call(ctx context.Context, tool string, args map[string]any) (answer, error)
	close()
}

type sdkCaller struct{ cs *mcp.ClientSession }

func (c sdkCaller) call(ctx context.Context, tool string, args map[string]any) (answer, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return answer{}, err
	}
	return answerOf(res), nil
}

func (c sdkCaller) close() { _ = c.cs.Close() }

// recorder keeps the first tools/call request a go-sdk session sends, so
// the lean client can send the same one: the session's headers (its id,
// its revision, the routing headers of 2026-07-28) and the body's form.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	req  *http.Request
	body []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil {
		r.mu.Lock()
		seen := r.req != nil
		r.mu.Unlock()
		if !seen {
			body, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				r.mu.Lock()
				r.req, r.body = req.Clone(context.Background()), body
				r.mu.Unlock()
			}
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	return r.base.RoundTrip(req)
}

func (r *recorder) recorded() (*http.Request, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.req, r.body
}

// leanCaller sends tools/call requests shaped as its go-sdk session sent
// its first one, and reads each answer once.
type leanCaller struct {
	cs     *mcp.ClientSession // kept open: its session (and event stream) is the one the calls use
	hc     *http.Client
	url    string
	header http.Header
	msg    map[string]any // the recorded request, decoded; its id and arguments change per call
	params map[string]any
	id     int64
	buf    bytes.Buffer
}

// leanDial opens a session with the go-sdk client, lets it make one call of
// tool to learn the request's form, and answers a lean caller on that
// session.
func leanDial(ctx context.Context, t target, tr http.RoundTripper, args map[string]any) (*leanCaller, error) {
	rec := &recorder{base: bearerRT{t.token, tr}}
	cs, err := connectOne(ctx, t, &http.Client{Transport: rec})
	if err != nil {
		return nil, err
	}
	if _, err := (sdkCaller{cs}).call(ctx, t.tool, args); err != nil {
		_ = cs.Close()
		return nil, fmt.Errorf("%s (%s): the go-sdk call the lean client copies: %w", t.path, t.rev, err)
	}
	req, body := rec.recorded()
	if req == nil {
		_ = cs.Close()
		return nil, fmt.Errorf("%s (%s): the go-sdk client sent no tools/call to copy", t.path, t.rev)
	}
	c := &leanCaller{cs: cs, hc: &http.Client{Transport: bearerRT{t.token, tr}}, url: req.URL.String(), header: req.Header.Clone(),
		id: 1 << 40} // far above the go-sdk session's own ids
	if err := json.Unmarshal(body, &c.msg); err != nil {
		_ = cs.Close()
		return nil, fmt.Errorf("the recorded tools/call: %w", err)
	}
	c.params, _ = c.msg["params"].(map[string]any)
	if c.params == nil {
		_ = cs.Close()
		return nil, errors.New("the recorded tools/call has no params")
	}
	return c, nil
}

func (c *leanCaller) close() { _ = c.cs.Close() }

func (c *leanCaller) call(ctx context.Context, tool string, args map[string]any) (answer, error) {
	c.id++
	c.msg["id"] = c.id
	c.params["name"], c.params["arguments"] = tool, args
	body, err := json.Marshal(c.msg)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header = c.header.Clone()
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(resp.Body); err != nil {
		return answer{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, c.buf.Bytes())
	}
	return readReply(resp.Header.Get("Content-Type"), c.buf.Bytes(), strconv.FormatInt(c.id, 10))
}

// readReply finds the response with id in a POST's answer, a JSON body or
// an event stream (whose other messages, notifications, are passed over).
func readReply(contentType string, body []byte, id string) (answer, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return answer{}, fmt.Errorf("content type %q: %w", contentType, err)
	}
	switch mt {
	case "application/json":
		a, ok, err := decodeReply(body, id)
		if err == nil && !ok {
			err = fmt.Errorf("the answer is not the response to request %s", id)
		}
		return a, err
	case "text/event-stream":
		var data []byte
		for line := range bytes.Lines(body) {
			line = bytes.TrimRight(line, "\r\n")
			if len(line) == 0 {
				if len(data) > 0 {
					if a, ok, err := decodeReply(data, id); err != nil || ok {
						return a, err
					}
				}
				data = data[:0]
				continue
			}
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			}
		}
		if len(data) > 0 {
			if a, ok, err := decodeReply(data, id); err != nil || ok {
				return a, err
			}
		}
		return answer{}, fmt.Errorf("the event stream ended without the response to request %s", id)
	default:
		return answer{}, fmt.Errorf("content type %q is neither JSON nor an event stream", mt)
	}
}

// reply is the part of a JSON-RPC message the lean client reads. The items
// of a page are kept as raw values: checked to be JSON, counted, not built.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent *struct {
			Items *[]json.RawMessage `json:"items"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// decodeReply reads one message; ok is false for a message that is not the
// response to id (a notification, or a request of the server's).
func decodeReply(msg []byte, id string) (a answer, ok bool, err error) {
	var r reply
	if err := json.Unmarshal(msg, &r); err != nil {
		return answer{}, false, fmt.Errorf("a message that is not JSON-RPC: %w", err)
	}
	if r.Method != "" {
		return answer{}, false, nil
	}
	if string(r.ID) != id {
		return answer{}, false, fmt.Errorf("a response to request %s, not %s", r.ID, id)
	}
	switch {
	case r.Error != nil:
		return answer{}, true, fmt.Errorf("JSON-RPC error %d: %s", r.Error.Code, r.Error.Message)
	case r.Result == nil:
		return answer{}, true, errors.New("a response with neither a result nor an error")
	}
	a = answer{isError: r.Result.IsError, items: -1}
	for _, c := range r.Result.Content {
		a.content = append(a.content, contentItem{c.Type, c.Text})
	}
	if sc := r.Result.StructuredContent; sc != nil && sc.Items != nil {
		a.items = len(*sc.Items)
	}
	return a, true, nil
}
