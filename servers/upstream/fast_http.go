package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/crewlet/hub/servers/rawjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpLink carries fast calls to a streamable HTTP server: each call its
// own POST, answered with JSON or an event stream, on the session the SDK
// opened (its id and revision in the headers, as the SDK sends them).
type httpLink struct {
	i       *Instance
	url     string
	client  *http.Client
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
	return l.client.Do(req)
}

// maxMessage bounds one message the link reads (a JSON body, one event of
// a stream): the SDK's own bound on a message, which a stdio line has too
// (maxLine). A longer answer is refused, never gathered without end
// (issue 25 defect 8).
const maxMessage = mcp.DefaultMaxLineLength

func (l *httpLink) call(ctx context.Context, f *flight, id, name string, body []byte) (json.RawMessage, error) {
	resp, err := l.post(ctx, body, true, name)
	if err != nil {
		return nil, err
	}
	drain := true
	defer func() {
		// Read to the end (a stream ends after its response), so the
		// connection goes back to the pool rather than being closed; an
		// answer past the bound is not read further.
		if drain {
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		}
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
		if errors.Is(err, errTooLarge) {
			drain = false
			return nil, &UnreadableError{Why: tooLarge}
		}
		if err != nil {
			return nil, errLinkBroken
		}
		return answerOf(b, id)
	case "text/event-stream":
		res, err := l.events(ctx, f, resp.Body, id)
		var unreadable *UnreadableError
		if errors.As(err, &unreadable) {
			drain = false
		}
		return res, err
	}
	return nil, fmt.Errorf("the server answered with content of type %q", ct)
}

// errTooLarge is a message past maxMessage.
var errTooLarge = errors.New("message too large")

var tooLarge = fmt.Sprintf("a message larger than the %d MiB the hub takes", maxMessage>>20)

func readBody(resp *http.Response) ([]byte, error) {
	if resp.ContentLength > maxMessage {
		return nil, errTooLarge
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, maxMessage+1))
	if n > maxMessage {
		return nil, errTooLarge
	}
	return buf.Bytes(), err
}

// readers are the buffers event streams are read through, reused: what is
// read is copied out of them before they go back.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// events reads the event stream a call is answered on: the server's
// notifications go where the SDK's client would send them (onNotify), its
// requests of the client are answered on the session, and the response
// ends the stream.
func (l *httpLink) events(ctx context.Context, f *flight, body io.Reader, id string) (json.RawMessage, error) {
	r := readers.Get().(*bufio.Reader)
	r.Reset(body)
	var resumed io.Closer // the body of the stream resumed last, if any
	defer func() {
		r.Reset(nil)
		readers.Put(r)
		if resumed != nil {
			resumed.Close()
		}
	}()
	var data []byte
	size := 0 // bytes of the event being read, its field names included
	// unreadable is a message on the call's stream the hub could not read
	// whose id could not be told either: if the stream ends without an
	// answer, that was the answer.
	var unreadable *UnreadableError
	// rs is what a broken stream is resumed from: the last event's id and
	// the wait the server asked for.
	var rs resumption
	for {
		line, err := r.ReadSlice('\n')
		size += len(line)
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long data line: gather it whole, within the bound.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && size <= maxMessage {
				line, err = r.ReadSlice('\n')
				size += len(line)
				long = append(long, line...)
			}
			line = long
		}
		if size > maxMessage {
			return nil, &UnreadableError{Why: tooLarge}
		}
		if err != nil && len(line) == 0 {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if unreadable != nil {
				return nil, unreadable
			}
			// The stream broke before the answer: resume it after the
			// last event read, as the SDK's client does (issue 25 defect
			// 8), or give up where the server gave no event ids.
			next, rerr := l.resume(ctx, &rs)
			if rerr != nil {
				return nil, rerr
			}
			if resumed != nil {
				resumed.Close()
			}
			resumed = next
			r.Reset(next)
			data, size = nil, 0
			continue
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			} else if v, ok := bytes.CutPrefix(line, []byte("id:")); ok {
				rs.lastID = string(bytes.TrimPrefix(v, []byte(" ")))
			} else if v, ok := bytes.CutPrefix(line, []byte("retry:")); ok {
				if ms, err := strconv.Atoi(string(bytes.TrimPrefix(v, []byte(" ")))); err == nil && ms >= 0 {
					rs.retry = time.Duration(ms) * time.Millisecond
				}
			}
			continue
		}
		size = 0
		if len(data) == 0 {
			continue
		}
		msg := data
		data = nil
		res, done, err := l.message(ctx, f, msg, id)
		if done {
			return res, err
		}
		if err != nil && unreadable == nil {
			unreadable, _ = err.(*UnreadableError)
		}
	}
}

// resumption is where a call's broken stream stands: the last event id
// read, the wait the server asked for, and the tries made since the last
// id moved.
type resumption struct {
	lastID   string
	retry    time.Duration
	progress string // lastID when tries was last reset
	tries    int
}

// maxResumes bounds the tries to resume a stream that makes no progress,
// as the SDK's client bounds its reconnections (5 by default).
const maxResumes = 5

// resume asks the server to go on with a call's broken stream after its
// last event (a GET with Last-Event-ID, as the streamable HTTP transport
// says), waiting first as the server asked, else on a growing backoff.
// Without an event id nothing can be resumed, and a call whose stream
// keeps breaking without progress is given up: the link broke.
func (l *httpLink) resume(ctx context.Context, rs *resumption) (io.ReadCloser, error) {
	if rs.lastID == "" {
		return nil, errLinkBroken
	}
	if rs.lastID != rs.progress {
		rs.progress, rs.tries = rs.lastID, 0
	}
	for rs.tries < maxResumes {
		rs.tries++
		wait := rs.retry
		if wait == 0 {
			wait = resumeBackoff(rs.tries)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url, nil)
		if err != nil {
			return nil, err
		}
		h := req.Header
		h["Accept"] = []string{"text/event-stream"}
		h["Mcp-Protocol-Version"] = []string{l.version}
		h["Last-Event-Id"] = []string{rs.lastID}
		if l.session != "" {
			h["Mcp-Session-Id"] = []string{l.session}
		}
		resp, err := l.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		switch {
		case resp.StatusCode == http.StatusNotFound && l.session != "":
			resp.Body.Close()
			return nil, errSessionGone
		case resp.StatusCode != http.StatusOK || ct != "text/event-stream":
			resp.Body.Close()
			continue
		}
		return resp.Body, nil
	}
	return nil, errLinkBroken
}

// resumeBackoff is the wait before a stream's nth try to resume: a second,
// growing by half each try up to 30 s, with jitter, as the SDK's client
// waits.
func resumeBackoff(n int) time.Duration {
	d := time.Second
	for range n - 1 {
		d += d / 2
	}
	d = min(d, 30*time.Second)
	return d + rand.N(d)
}

// message handles one message of a call's stream; done when it is the
// call's response. What a message is, is said by its top-level members
// alone: a result may hold a "method" anywhere inside (issue 25 defect 1).
// A message the hub cannot read is the call's answer when its id says so
// (done, refused as unreadable); otherwise it is answered as err, not done.
func (l *httpLink) message(ctx context.Context, f *flight, msg []byte, id string) (json.RawMessage, bool, error) {
	m, err := readMessage(msg)
	if err != nil {
		unreadable := &UnreadableError{Why: unreadableWhy(msg)}
		gotID := lenientID(msg)
		if gotID == nil {
			return nil, false, unreadable
		}
		return nil, string(gotID) == `"`+id+`"`, unreadable
	}
	if m.method != nil {
		method, ok := rawjson.StringText(m.method)
		if !ok {
			return nil, false, nil
		}
		if !m.hasID() {
			l.i.notifyFor(f, method, m.params)
			return nil, false, nil
		}
		// A request on the call's own stream is that call's: it goes to
		// the call's client, whatever else is in flight (issue 25
		// defect 4).
		result, err := l.i.serverRequest(ctx, f, method, m.params)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if resp, perr := l.post(rctx, reply(m.id, result, err), false, ""); perr == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		} else {
			l.i.log.Warn("server_request_unanswered", "method", method, "error", perr.Error())
		}
		return nil, false, nil
	}
	if string(m.id) != `"`+id+`"` {
		// Not this call's response: some other message, passed over.
		return nil, false, nil
	}
	res, err := answerOf(msg, id)
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
