package front

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The front answers what its handler writes as net/http answers it, case
// by case: status, headers (the sniffed Content-Type included), body, and
// the request as the handler sees it. Every case is sent twice on one
// connection, which the front keeps alive and answers itself.
func TestFrontAnswersAsNetHTTPDoes(t *testing.T) {
	large := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB: past the buffer
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		// chunked: the front's framing of the answer.
		chunked bool
		// closes: the answer ends its connection (as with net/http), so
		// the case is sent once.
		closes bool
	}{
		{"text, type sniffed", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }, false, false},
		{"html, type sniffed", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html><body>x</body></html>") }, false, false},
		{"JSON with its type", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		}, false, false},
		{"length stated by the handler", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		}, false, false},
		{"no content", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, false, false},
		{"not modified", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) }, false, false},
		{"status and body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "short and stout")
		}, false, false},
		{"http.Error", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such thing", http.StatusNotFound) }, false, false},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, false, false},
		{"type suppressed", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			io.WriteString(w, "x")
		}, false, false},
		{"date set by the handler", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", handlersDate)
			io.WriteString(w, "x")
		}, false, false},
		{"header set after the body is not sent", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "a")
			w.Header().Set("X-Late", "1")
		}, false, false},
		{"a second WriteHeader is ignored", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusInternalServerError)
		}, false, false},
		{"body echoed", func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) }, false, false},
		{"a body refused after no content", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
				t.Errorf("writing a body after 204: %v, want http.ErrBodyNotAllowed", err)
			}
		}, false, false},
		{"more than the stated length refused", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "3")
			io.WriteString(w, "abc")
			if _, err := io.WriteString(w, "d"); !errors.Is(err, http.ErrContentLength) {
				t.Errorf("writing past Content-Length: %v, want http.ErrContentLength", err)
			}
		}, false, true},
		{"flushed: an event stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: 1\n\n")
			http.NewResponseController(w).Flush()
			io.WriteString(w, "event: message\ndata: 2\n\n")
		}, true, false},
		{"past the buffer", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, large) }, true, false},
		{"the request as the handler sees it", func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			_, local := ctx.Value(http.LocalAddrContextKey).(interface{ String() string })
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s %s host=%s proto=%s len=%d server=%v local=%v remote=%v hostHeader=%v type=%s body=%s",
				r.Method, r.RequestURI, r.URL.Path, r.Host, r.Proto, r.ContentLength, ctx.Value(http.ServerContextKey) != nil,
				local, r.RemoteAddr != "", r.Header["Host"] != nil, r.Header.Get("Content-Type"), body)
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr, plain := startFront(t, tc.h, defaultLimits), startPlain(t, tc.h, defaultLimits)
			fc, pc := dial(t, fr.addr), dial(t, plain.addr)
			times := 2
			if tc.closes {
				times = 1
			}
			for range times {
				req := post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
				fc.send(req)
				pc.send(req)
				got, want := fc.answer("POST"), pc.answer("POST")
				if got == nil || want == nil {
					t.Fatalf("no answer: front %v, net/http %v", got, want)
				}
				sameAnswer(t, got, want)
				if chunked := slices.Contains(got.resp.TransferEncoding, "chunked"); chunked != tc.chunked {
					t.Errorf("chunked %v, want %v", chunked, tc.chunked)
				}
				if !tc.chunked && bodyAllowed(got.resp.StatusCode) && got.resp.ContentLength != int64(len(got.body)) {
					t.Errorf("Content-Length %d for a body of %d", got.resp.ContentLength, len(got.body))
				}
			}
			if n := fr.fr.answered.Load(); n != uint64(times) {
				t.Errorf("the front answered %d requests, want %d (handed over %d)", n, times, fr.fr.handedOver.Load())
			}
			if tc.closes && (!fc.closed(5*time.Second) || !pc.closed(5*time.Second)) {
				t.Error("the connection is still open")
			}
		})
	}
}

const handlersDate = "Mon, 01 Jan 2024 00:00:00 GMT"

// sameAnswer holds got to want: status, body, and every header but the
// framing (net/http chunks any answer past 2 KiB; the front states the
// length up to its buffer) and the clock.
func sameAnswer(t *testing.T, got, want *answer) {
	t.Helper()
	if got.resp.StatusCode != want.resp.StatusCode {
		t.Errorf("status %d, net/http answers %d", got.resp.StatusCode, want.resp.StatusCode)
	}
	if got.body != want.body {
		t.Errorf("body %.200q, net/http answers %.200q", got.body, want.body)
	}
	g, w := got.resp.Header.Clone(), want.resp.Header.Clone()
	if (g.Get("Date") == "") != (w.Get("Date") == "") {
		t.Errorf("Date %q, net/http's %q", g.Get("Date"), w.Get("Date"))
	}
	for _, h := range []http.Header{g, w} {
		if h.Get("Date") != handlersDate {
			delete(h, "Date") // the clock's, not the handler's
		}
		delete(h, "Content-Length")
		delete(h, "Transfer-Encoding")
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("headers %v, net/http answers %v", g, w)
	}
}

// What the front does not answer goes to net/http before a byte of it is
// consumed, so it is answered exactly as net/http alone answers it —
// refusals included.
func TestFrontHandsOverWhatItDoesNotAnswer(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %q", r.Method, r.Proto, body)
	})
	huge := strings.Repeat("x", bufSize)
	for _, tc := range []struct{ name, raw, method string }{
		{"HEAD", "HEAD /mcp HTTP/1.1\r\nHost: hub.test\r\n\r\n", "HEAD"},
		{"a chunked body", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "POST"},
		{"Expect: 100-continue", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"Connection: close", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"HTTP/1.0", "POST /mcp HTTP/1.0\r\nHost: hub.test\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"Upgrade", "GET /mcp HTTP/1.1\r\nHost: hub.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "GET"},
		{"the host in the target", "POST http://hub.test/mcp HTTP/1.1\r\nHost: other.test\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"no Host", "POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"two Hosts", "POST /mcp HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"a bad Host", "POST /mcp HTTP/1.1\r\nHost: a b\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"two lengths", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!", "POST"},
		{"a bad length", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: -2\r\n\r\nhi", "POST"},
		{"a bad header name", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"a bad method", "P(ST /mcp HTTP/1.1\r\nHost: hub.test\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"no protocol", "POST /mcp\r\nHost: hub.test\r\n\r\n", "POST"},
		{"a head past the buffer", "POST /mcp HTTP/1.1\r\nHost: hub.test\r\nX-Big: " + huge + "\r\nContent-Length: 2\r\n\r\nhi", "POST"},
		{"a bare LF head", "POST /mcp HTTP/1.1\nHost: hub.test\nContent-Length: 2\n\nhi", "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr, plain := startFront(t, h, defaultLimits), startPlain(t, h, defaultLimits)
			fc, pc := dial(t, fr.addr), dial(t, plain.addr)
			fc.send(tc.raw)
			pc.send(tc.raw)
			got, want := fc.answer(tc.method), pc.answer(tc.method)
			if (got == nil) != (want == nil) {
				t.Fatalf("front answered %v, net/http %v", got != nil, want != nil)
			}
			if want != nil {
				if got.resp.StatusCode != want.resp.StatusCode || got.body != want.body {
					t.Fatalf("front: %d %q; net/http: %d %q", got.resp.StatusCode, got.body, want.resp.StatusCode, want.body)
				}
			}
			answered := fr.fr.answered.Load()
			if tc.name == "a bare LF head" {
				// net/http reads it as it reads CRLF, and so does the front.
				if answered != 1 {
					t.Fatalf("the front answered %d, want 1", answered)
				}
				return
			}
			if answered != 0 || fr.fr.handedOver.Load() != 1 {
				t.Fatalf("the front answered %d and handed over %d, want 0 and 1", answered, fr.fr.handedOver.Load())
			}
		})
	}
}

// Requests sent back to back on one connection are answered in order,
// also when one of them hands the connection over to net/http.
func TestFrontAnswersPipelinedRequestsInOrder(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, body)
	})
	s := startFront(t, h, defaultLimits)
	c := dial(t, s.addr)
	c.send(post("one") + post("two") + "GET /mcp HTTP/1.1\r\nHost: hub.test\r\n\r\n" + post("three") +
		"HEAD /mcp HTTP/1.1\r\nHost: hub.test\r\n\r\n" + post("four"))
	for _, want := range []struct{ method, body string }{
		{"POST", "POST one"}, {"POST", "POST two"}, {"GET", "GET "}, {"POST", "POST three"}, {"HEAD", ""}, {"POST", "POST four"},
	} {
		a := c.answer(want.method)
		if a == nil || a.resp.StatusCode != http.StatusOK || a.body != want.body {
			t.Fatalf("want %q, got %+v", want.body, a)
		}
	}
	if a, h := s.fr.answered.Load(), s.fr.handedOver.Load(); a != 4 || h != 1 {
		t.Fatalf("answered %d and handed over %d, want 4 (up to the HEAD) and 1", a, h)
	}
}

// A body the handler leaves unread is read past, and the connection kept;
// one too long to read past ends the connection after the answer, which
// says so.
func TestFrontReadsPastAnUnreadBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ignored") })
	s := startFront(t, h, defaultLimits)
	c := dial(t, s.addr)
	c.send(post(strings.Repeat("a", 10<<10)))
	c.send(post("next"))
	for range 2 {
		if a := c.answer("POST"); a == nil || a.body != "ignored" || a.resp.Close {
			t.Fatalf("answer %+v", a)
		}
	}

	c = dial(t, s.addr)
	big := post(strings.Repeat("b", maxDrain+1))
	go func() { _, _ = io.WriteString(c.c, big) }()
	a := c.answer("POST")
	if a == nil || a.body != "ignored" || !a.resp.Close {
		t.Fatalf("answer %+v, want it with Connection: close", a)
	}
	if !c.closed(5 * time.Second) {
		t.Fatal("the connection is still open")
	}
}

// A request that runs past watchAfter is watched: the client hanging up
// ends its context. One that answers after its watch began keeps its
// connection, and the request sent while it ran (whose first byte the
// watch read) is read whole.
func TestFrontEndsTheContextOfAClientThatHangsUp(t *testing.T) {
	ended := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "wait for the end":
			<-r.Context().Done()
			close(ended)
		case "slow":
			<-release
		}
		fmt.Fprintf(w, "%s done %s", r.Method, body)
	})
	s := startFront(t, h, defaultLimits)
	watching := make(chan struct{}, 2)
	read := make(chan int, 2)
	s.fr.onWatch = func() { watching <- struct{}{} }
	s.fr.onWatchRead = func(n int) { read <- n }

	c := dial(t, s.addr)
	c.send(post("wait for the end"))
	within(t, watching, 5*time.Second, "the watch beginning")
	c.c.Close()
	within(t, ended, 5*time.Second, "the request's context ending after the client hung up")
	<-read

	c = dial(t, s.addr)
	c.send(post("slow"))
	within(t, watching, 5*time.Second, "the watch beginning")
	c.send(post("behind it"))
	if n := <-read; n != 1 {
		t.Fatalf("the watch read %d bytes, want the first of the request behind", n)
	}
	close(release)
	for _, want := range []string{"POST done slow", "POST done behind it"} {
		if a := c.answer("POST"); a == nil || a.body != want {
			t.Fatalf("want %q, got %+v", want, a)
		}
	}
	if s.fr.answered.Load() != 3 {
		t.Fatalf("answered %d, want 3", s.fr.answered.Load())
	}
}

// A handler that panics ends its connection without an answer, as with
// net/http, and is logged (unless it is http.ErrAbortHandler); the server
// goes on answering.
func TestFrontSurvivesAPanickingHandler(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "panic":
			panic("the handler fell over")
		case "abort":
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, "fine")
	})
	ln := startFront(t, h, defaultLimits)
	var logged bytes.Buffer
	var mu sync.Mutex
	ln.fr.srv.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), "", 0)
	for _, body := range []string{"panic", "abort"} {
		c := dial(t, ln.addr)
		c.send(post(body))
		if a := c.answer("POST"); a != nil {
			t.Fatalf("%s: answered %+v", body, a)
		}
	}
	c := dial(t, ln.addr)
	c.send(post("ok"))
	if a := c.answer("POST"); a == nil || a.body != "fine" {
		t.Fatalf("after the panics: %+v", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logged.String(), "http: panic serving"); n != 1 || !strings.Contains(logged.String(), "the handler fell over") {
		t.Fatalf("logged %q, want the one panic that is not an abort", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A handler may take the connection over (as a 2025 session's event
// stream is served): the front leaves it, with no deadline left on it.
func TestFrontLetsAHandlerTakeTheConnection(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		go func() {
			defer conn.Close()
			io.WriteString(conn, "HTTP/1.1 200 OK\r\n\r\n")
			// Past the header timeout: no deadline may cut the read.
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(conn, "echo "+line)
		}()
	})
	s := startFront(t, h, limits{header: 100 * time.Millisecond, read: 100 * time.Millisecond, idle: 100 * time.Millisecond})
	c := dial(t, s.addr)
	c.send(post("take it"))
	status, err := c.br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("status line %q %v", status, err)
	}
	time.Sleep(300 * time.Millisecond) // past every limit of the server: what is tested
	c.send("still here\n")
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, _ := io.ReadAll(c.br)
	if string(rest) != "\r\necho still here\n" {
		t.Fatalf("after the limits: %q", rest)
	}
}

// Connections nobody uses are closed: one whose head never ends within
// the header timeout, and one left idle after an answer within the idle
// timeout.
func TestFrontClosesConnectionsNobodyUses(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	s := startFront(t, h, limits{header: 200 * time.Millisecond, read: 200 * time.Millisecond, idle: 200 * time.Millisecond})

	c := dial(t, s.addr)
	c.send("POST /mcp HTTP/1.1\r\nHost: hub.test\r\n")
	if !c.closed(5 * time.Second) {
		t.Fatal("a connection whose head never ends is still open")
	}

	c = dial(t, s.addr)
	c.send(post("x"))
	if a := c.answer("POST"); a == nil || a.body != "ok" {
		t.Fatalf("answer %+v", a)
	}
	if !c.closed(5 * time.Second) {
		t.Fatal("an idle connection is still open")
	}
	if s.fr.answered.Load() != 1 {
		t.Fatalf("answered %d", s.fr.answered.Load())
	}
}

// Shutdown closes the idle connections at once, lets the request being
// answered finish (its answer saying the connection closes), and returns
// when it has; Serve then returns http.ErrServerClosed. Close after it
// (and twice) is harmless.
func TestFrontShutsDownGracefully(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) == "slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "done")
	})
	s := startFront(t, h, defaultLimits)
	idle := dial(t, s.addr)
	idle.send(post("quick"))
	if a := idle.answer("POST"); a == nil {
		t.Fatal("no answer")
	}
	busy := dial(t, s.addr)
	busy.send(post("slow"))
	within(t, started, 5*time.Second, "the slow request starting")

	shut := make(chan error, 1)
	go func() { shut <- s.fr.Shutdown(context.Background()) }()
	if !idle.closed(5 * time.Second) {
		t.Fatal("an idle connection was left open by Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request being answered", err)
	default:
	}
	close(release)
	a := busy.answer("POST")
	if a == nil || a.body != "done" || !a.resp.Close {
		t.Fatalf("the request being answered: %+v, want its answer with Connection: close", a)
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return once the request was answered")
	}
	if err := s.fr.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.fr.Close()
}

// Requests that end just as their watch begins are answered, every one:
// ending a watch must stop its read, however the two interleave.
func TestFrontAnswersRequestsThatEndAsTheirWatchBegins(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d, _ := time.ParseDuration(string(body))
		time.Sleep(d) // the handler's work: its length is what is tested
		io.WriteString(w, "done")
	})
	s := startFront(t, h, defaultLimits)
	var wg sync.WaitGroup
	for i := range 8 {
		c := dial(t, s.addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 25 {
				// Around watchAfter, a few microseconds apart.
				d := watchAfter + time.Duration((i*25+j)%41-20)*50*time.Microsecond
				c.send(post(d.String()))
				if a := c.answer("POST"); a == nil || a.body != "done" {
					t.Errorf("request %d of client %d: %+v", j, i, a)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A handler that says Connection: close has its answer sent and the
// connection closed after it; one that asks for the connection once its
// answer has begun is refused (net/http would flush and hand it over; the
// hub takes connections only before answering).
func TestFrontClosesWhenTheHandlerSaysSo(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case "late":
			io.WriteString(w, "begun")
			http.NewResponseController(w).Flush()
			if _, _, err := http.NewResponseController(w).Hijack(); !errors.Is(err, errHijackLate) {
				t.Errorf("hijack after the answer began: %v, want errHijackLate", err)
			}
		}
	})
	s := startFront(t, h, defaultLimits)
	c := dial(t, s.addr)
	c.send(post("late"))
	if a := c.answer("POST"); a == nil || a.body != "begun" || a.resp.Close {
		t.Fatalf("answer %+v", a)
	}
	c.send(post("close"))
	if a := c.answer("POST"); a == nil || a.body != "bye" || !a.resp.Close {
		t.Fatalf("answer %+v, want it with Connection: close", a)
	}
	if !c.closed(5 * time.Second) {
		t.Fatal("the connection is still open")
	}
	if n := s.fr.answered.Load(); n != 2 {
		t.Fatalf("answered %d, want 2", n)
	}
}
