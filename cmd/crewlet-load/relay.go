package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// relayServer is a reference for the forward section: Go's stock reverse
// proxy (net/http/httputil) in front of the HTTP echo, with no MCP in it
// at all. What it spends per call is what Go's HTTP server and client cost
// a process put in the path, before any routing, authentication or
// sanitising, so the hub's CPU per forwarded call can be read against it.
func relayServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "serve on ADDR (port 0 picks a free one; the address is printed)")
	to := fs.String("to", "", "the server every request is passed to, e.g. http://127.0.0.1:8080")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := relayHandler(*to)
	if err != nil {
		return err
	}
	return serveHTTP(ctx, *addr, h)
}

// relayHandler passes every request to the server at to, keeping the path,
// and streams each answer back as it comes (an event stream included).
func relayHandler(to string) (http.Handler, error) {
	u, err := url.Parse(to)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("relay: --to must be an http:// or https:// URL with a host")
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		FlushInterval: -1,
		// As many kept connections as the load has sessions, as the hub
		// keeps its own.
		Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is read whole first, as the hub reads it. Streamed, the
		// server closes it once the answer's headers are written, while the
		// client's transport may still look for bytes past its length; that
		// read fails and tears down the upstream connection under the answer
		// (go.dev/issue/40747).
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRelayBody))
		if err != nil {
			status := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "relay: reading the request body: "+err.Error(), status)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		proxy.ServeHTTP(w, r)
	}), nil
}

// maxRelayBody bounds a request the relay reads into memory.
const maxRelayBody = 4 << 20
