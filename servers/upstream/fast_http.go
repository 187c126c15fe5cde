package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// httpLink carries fast calls to a streamable HTTP server: each call its
// own POST, answered with JSON or an event stream, on the session the SDK
// opened (its id and revision in the headers, as the SDK sends them).
type httpLink struct {
	i      *Instance
	url    string
	client *http.Client
	// raw, when set, carries the calls instead of client, with headers
	// (the server's configured ones) set as client's transport sets them
	// (headerRT).
	raw     *http1Pool
	headers map[string]string
	version string
	session string // "" from 2026-07-28 on, which has no sessions
}

// errSessionGone is a server that no longer knows the session: it is over.
var errSessionGone = errors.New("the server no longer knows the session")

func (l *httpLink) post(ctx context.Context, body []byte, call bool, name string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	h["Mcp-Protocol-Version"] = []string{l.version}
	if l.session != "" {
		h["Mcp-Session-Id"] = []string{l.session}
	}
	if call && l.version >= "2026-07-28" {
		// The standard headers a 2026-07-28 request carries beside its
		// body, which the server checks against it.
		h["Mcp-Method"] = []string{"tools/call"}
		h["Mcp-Name"] = []string{name}
	}
	if l.raw != nil {
		setHeaders(h, l.headers)
		return l.raw.do(req)
	}
	return l.client.Do(req)
}

func (l *httpLink) call(ctx context.Context, id, name string, body []byte) (json.RawMessage, error) {
	resp, err := l.post(ctx, body, true, name)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Read to the end (a stream ends after its response), so the
		// connection goes back to the pool rather than being closed.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		resp.Body.Close()
	}()
	switch {
	case resp.StatusCode == http.StatusNotFound && l.session != "":
		return nil, errSessionGone
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		// A JSON-RPC error is the server refusing the call; anything else
		// is the transport's failure, said in the engine's words above.
		if b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20)); rerr == nil {
			if _, _, rpcErr, ok, _ := response(b); ok && rpcErr != nil {
				return nil, rpcErr
			}
		}
		return nil, fmt.Errorf("the server answered %s", resp.Status)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		b, err := readBody(resp)
		if err != nil {
			return nil, errLinkBroken
		}
		return answerOf(b, id)
	case "text/event-stream":
		return l.events(ctx, resp.Body, id)
	}
	return nil, fmt.Errorf("the server answered with content of type %q", ct)
}

func readBody(resp *http.Response) ([]byte, error) {
	var buf bytes.Buffer
	if resp.ContentLength > 0 && resp.ContentLength < 64<<20 {
		buf.Grow(int(resp.ContentLength))
	}
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}

// answerOf reads the response to request id out of one message.
func answerOf(msg []byte, id string) (json.RawMessage, error) {
	gotID, result, rpcErr, ok, err := response(msg)
	if err != nil || !ok {
		return nil, fmt.Errorf("the server answered something other than a response")
	}
	if string(gotID) != `"`+id+`"` {
		return nil, fmt.Errorf("the server answered another request")
	}
	if rpcErr != nil {
		return nil, rpcErr
	}
	return result, nil
}

// readers are the buffers event streams are read through, reused: what is
// read is copied out of them before they go back.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// events reads the event stream a call is answered on: the server's
// notifications go where the SDK's client would send them (onNotify), its
// requests of the client are answered on the session, and the response
// ends the stream.
func (l *httpLink) events(ctx context.Context, body io.Reader, id string) (json.RawMessage, error) {
	r := readers.Get().(*bufio.Reader)
	r.Reset(body)
	defer func() {
		r.Reset(nil)
		readers.Put(r)
	}()
	var data []byte
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long data line: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && len(line) == 0 {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errLinkBroken
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			}
			continue
		}
		if len(data) == 0 {
			continue
		}
		msg := data
		data = nil
		if res, done, err := l.message(ctx, msg, id); done {
			return res, err
		}
	}
}

// message handles one message of a call's stream; done when it is the
// call's response.
func (l *httpLink) message(ctx context.Context, msg []byte, id string) (json.RawMessage, bool, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if bytes.Contains(msg, []byte(`"method"`)) {
		if json.Unmarshal(msg, &m) != nil || m.Method == "" {
			return nil, false, nil
		}
		if len(m.ID) == 0 || string(m.ID) == "null" {
			l.i.onNotify(m.Method, m.Params)
			return nil, false, nil
		}
		result, err := l.i.serverRequest(ctx, m.Method, m.Params)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if resp, perr := l.post(rctx, reply(m.ID, result, err), false, ""); perr == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		} else {
			l.i.log.Warn("server_request_unanswered", "method", m.Method, "error", perr.Error())
		}
		return nil, false, nil
	}
	res, err := answerOf(msg, id)
	var wire *jsonrpc.Error
	if err != nil && !errors.As(err, &wire) {
		// Not this call's response: some other message, passed over.
		return nil, false, nil
	}
	return res, true, err
}

// cancel tells the server the call is cancelled, as the SDK's client does:
// a notification, sent with its own short bound.
func (l *httpLink) cancel(id, reason string) {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id + `","reason":`)
	r, _ := json.Marshal(reason)
	b = append(append(b, r...), "}}"...)
	if resp, err := l.post(ctx, b, false, ""); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
