package e2e_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hub dials a remote server with a clone of Go's default transport, so
// what a person sets for every Go program holds for it too: SSL_CERT_FILE
// says which CAs it trusts, HTTP_PROXY/HTTPS_PROXY which proxy it goes
// through, and NO_PROXY which hosts it reaches directly. These tests run the
// built hub against a go-sdk server over TLS and behind a real forward proxy.

// upstreamHost is a name no resolver knows (.test is reserved, RFC 2606):
// only the test's proxy maps it to the upstream's loopback address. Go never
// proxies localhost or a loopback address, so the proxy is only exercised
// for a name like this one.
const upstreamHost = "upstream.test"

type transportEchoIn struct {
	Text string `json:"text"`
}

// echoUpstream is a go-sdk streamable HTTP server with one tool, echo,
// that answers "echo: " and its text. Hosts lists the Host header of every
// request it was sent, so a test can tell which name the hub dialled it by.
type echoUpstream struct {
	http.Handler
	mu    sync.Mutex
	hosts []string
}

func newEchoUpstream() *echoUpstream {
	s := mcp.NewServer(&mcp.Implementation{Name: "transport-echo", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Answer the text given.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in transportEchoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	u := &echoUpstream{}
	// The server stands for a remote one: it listens on loopback only
	// because the test does, and is reached by upstreamHost, which the
	// SDK's guard against DNS rebinding of a loopback server would refuse.
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	u.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.hosts = append(u.hosts, r.Host)
		u.mu.Unlock()
		sdk.ServeHTTP(w, r)
	})
	return u
}

func (u *echoUpstream) seenHosts() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.hosts...)
}

// serveEchoTLS serves an echo upstream over TLS on loopback with a
// certificate ca issued for localhost, the loopback addresses and names.
func serveEchoTLS(t *testing.T, ca *hubtest.CA, names ...string) (*echoUpstream, *httptest.Server) {
	t.Helper()
	certFile, keyFile := filepath.Join(t.TempDir(), "upstream.pem"), filepath.Join(t.TempDir(), "upstream-key.pem")
	ca.Issue(t, 1, certFile, keyFile, names...)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	up := newEchoUpstream()
	srv := httptest.NewUnstartedServer(up)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return up, srv
}

// forwardProxy is an HTTP forward proxy: an absolute-URI request it
// forwards, a CONNECT it tunnels. It reaches only the hosts in routes
// (host:port as the client names it → the address it dials) and answers
// 502 for any other, and counts what passed through it by host:port.
type forwardProxy struct {
	routes map[string]string

	mu        sync.Mutex
	forwarded map[string][]string // host:port → the methods of the requests forwarded
	tunnelled map[string]int      // host:port → CONNECT tunnels opened
	unrouted  []string
}

func startForwardProxy(t *testing.T, routes map[string]string) (*forwardProxy, string) {
	t.Helper()
	p := &forwardProxy{routes: routes, forwarded: map[string][]string{}, tunnelled: map[string]int{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *forwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if r.Method != http.MethodConnect && !r.URL.IsAbs() {
		http.Error(w, "this is a proxy: send an absolute URI or CONNECT", http.StatusBadRequest)
		return
	}
	addr, ok := p.routes[target]
	p.mu.Lock()
	switch {
	case !ok:
		p.unrouted = append(p.unrouted, r.Method+" "+target)
	case r.Method == http.MethodConnect:
		p.tunnelled[target]++
	default:
		p.forwarded[target] = append(p.forwarded[target], r.Method)
	}
	p.mu.Unlock()
	if !ok {
		http.Error(w, "proxy: no route to "+target, http.StatusBadGateway)
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, addr)
		return
	}
	// The request keeps the name the client gave (its Host header); only
	// the connection goes to the routed address. ReverseProxy drops the
	// hop-by-hop headers and flushes an event stream as it comes.
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Host = addr
		pr.Out.Host = pr.In.Host
	}}
	rp.ServeHTTP(w, r)
}

func (p *forwardProxy) tunnel(w http.ResponseWriter, addr string) {
	up, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		conn.Close()
		return
	}
	// Either side closing ends the tunnel: the other is closed with it.
	go func() {
		defer up.Close()
		defer conn.Close()
		_, _ = io.Copy(up, buf)
	}()
	go func() {
		defer up.Close()
		defer conn.Close()
		_, _ = io.Copy(conn, up)
	}()
}

// seen is what the proxy forwarded and tunnelled for host, and what it
// was asked for that it has no route to.
func (p *forwardProxy) seen(host string) (forwarded []string, tunnelled int, unrouted []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.forwarded[host]...), p.tunnelled[host], append([]string(nil), p.unrouted...)
}

// noProxyEnv clears every proxy variable a hub would otherwise inherit
// from the test's environment, upper and lower case (Go reads both).
var noProxyEnv = []string{"HTTP_PROXY=", "http_proxy=", "HTTPS_PROXY=", "https_proxy=", "NO_PROXY=", "no_proxy="}

func withEnv(extra ...string) []string { return append(append([]string(nil), noProxyEnv...), extra...) }

// remoteEchoHub runs the hub with one remote server, "remote", at url.
func remoteEchoHub(t *testing.T, url string, env ...string) *hubProc {
	t.Helper()
	return hubWithServers(t, fmt.Sprintf("  - name: remote\n    url: %q\n", url), env...)
}

// serverPage is the server's row on GET /mcp-servers/{name}: its state and
// why it is not running.
type serverPage struct {
	Server struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"server"`
	NoToolsBecause string `json:"no_tools_because"`
}

func remotePage(t *testing.T, h *hubProc) serverPage {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, h.baseURL()+"/mcp-servers/remote", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page serverPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp-servers/remote: %d %v", resp.StatusCode, err)
	}
	return page
}

// echoThroughHub calls echo through the hub's /operator/mcp with the go-sdk
// client and requires the upstream's answer. The hub has started its
// servers before it answers, so the first call finds "remote" running.
func echoThroughHub(t *testing.T, h *hubProc, text string) {
	t.Helper()
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "echo", map[string]any{"text": text})
	if got := hubtest.Text(res); res.IsError || got != "echo: "+text {
		t.Fatalf("echo through the hub: isError %v %q; server page %+v; log:\n%s", res.IsError, got, remotePage(t, h), h.logs())
	}
}

// requireUnreached checks that the hub could not start "remote" and says
// why in the words of each want: on the server's page, in its log, and to
// a client calling its tool, which the hub does not offer.
func requireUnreached(t *testing.T, h *hubProc, wants ...string) {
	t.Helper()
	page := remotePage(t, h)
	if page.Server.State != "Failing" {
		t.Fatalf("the server's state is %q (%s), want Failing", page.Server.State, page.Server.Reason)
	}
	for _, w := range wants {
		if !strings.Contains(page.Server.Reason, w) {
			t.Errorf("the server's reason %q does not say %q", page.Server.Reason, w)
		}
	}
	logHas(t, h.logs(), "mcp_server_failed", append([]string{`"server":"remote"`}, wants...)...)
	cs, err := goSDKClient(t, h.mcpURL(), e2eToken, "")
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, "echo", map[string]any{"text": "hi"})
	if text := hubtest.Text(res); !res.IsError || !strings.Contains(text, `No tool called "echo" is registered`) {
		t.Fatalf("echo through a hub that could not reach its server: isError %v %q", res.IsError, text)
	}
}

// A remote server over https://: the hub trusts the server's CA when
// SSL_CERT_FILE names it, and refuses the server's certificate, saying so,
// when SSL_CERT_FILE names another CA.
func TestUpstreamOverHTTPS(t *testing.T) {
	ca := hubtest.NewCA(t)
	up, srv := serveEchoTLS(t, ca)
	url := srv.URL + "/mcp"
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("the upstream is at %s", url)
	}

	t.Run("trusting its CA", func(t *testing.T) {
		h := remoteEchoHub(t, url, withEnv("SSL_CERT_FILE="+ca.CertFile)...)
		echoThroughHub(t, h, "over tls")
		if len(up.seenHosts()) == 0 {
			t.Fatal("the upstream saw no request")
		}
	})

	t.Run("trusting another CA", func(t *testing.T) {
		other := hubtest.NewCA(t)
		h := remoteEchoHub(t, url, withEnv("SSL_CERT_FILE="+other.CertFile)...)
		requireUnreached(t, h, "certificate signed by unknown authority")
	})
}

// A remote server behind an HTTP forward proxy: with HTTP_PROXY set the hub
// sends its requests to the proxy, which alone resolves the server's name;
// without it, or with the name in NO_PROXY, the hub dials the name itself,
// finds no such host, and says so.
func TestUpstreamThroughHTTPProxy(t *testing.T) {
	up := newEchoUpstream()
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	named := net.JoinHostPort(upstreamHost, strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port))
	url := "http://" + named + "/mcp"
	proxy, proxyURL := startForwardProxy(t, map[string]string{named: srv.Listener.Addr().String()})

	t.Run("HTTP_PROXY", func(t *testing.T) {
		h := remoteEchoHub(t, url, withEnv("HTTP_PROXY="+proxyURL)...)
		echoThroughHub(t, h, "via the proxy")
		forwarded, tunnelled, unrouted := proxy.seen(named)
		if !slices.Contains(forwarded, http.MethodPost) || tunnelled != 0 || len(unrouted) != 0 {
			t.Fatalf("the proxy forwarded %v to %s, tunnelled %d, was asked for %v", forwarded, named, tunnelled, unrouted)
		}
		requireHostsAll(t, up, named)
	})

	t.Run("no proxy", func(t *testing.T) {
		before, _, _ := proxy.seen(named)
		h := remoteEchoHub(t, url, withEnv()...)
		requireUnreached(t, h, "lookup "+upstreamHost)
		if after, _, _ := proxy.seen(named); len(after) != len(before) {
			t.Fatalf("the proxy forwarded %v to a hub that has no proxy", after[len(before):])
		}
	})

	t.Run("NO_PROXY names the host", func(t *testing.T) {
		before, _, _ := proxy.seen(named)
		h := remoteEchoHub(t, url, withEnv("HTTP_PROXY="+proxyURL, "NO_PROXY="+upstreamHost)...)
		requireUnreached(t, h, "lookup "+upstreamHost)
		if after, _, _ := proxy.seen(named); len(after) != len(before) {
			t.Fatalf("the proxy forwarded %v for a host NO_PROXY names", after[len(before):])
		}
	})
}

// A remote server over https:// behind the proxy: with HTTPS_PROXY set the
// hub opens a CONNECT tunnel through it and speaks TLS to the server inside,
// trusting the server's CA through SSL_CERT_FILE; HTTP_PROXY alone is not
// used for an https:// server.
func TestUpstreamThroughHTTPSProxyTunnel(t *testing.T) {
	ca := hubtest.NewCA(t)
	up, srv := serveEchoTLS(t, ca, upstreamHost)
	named := net.JoinHostPort(upstreamHost, strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port))
	url := "https://" + named + "/mcp"
	proxy, proxyURL := startForwardProxy(t, map[string]string{named: srv.Listener.Addr().String()})

	t.Run("HTTPS_PROXY", func(t *testing.T) {
		h := remoteEchoHub(t, url, withEnv("HTTPS_PROXY="+proxyURL, "SSL_CERT_FILE="+ca.CertFile)...)
		echoThroughHub(t, h, "through the tunnel")
		forwarded, tunnelled, unrouted := proxy.seen(named)
		if tunnelled == 0 || len(forwarded) != 0 || len(unrouted) != 0 {
			t.Fatalf("the proxy tunnelled %d to %s, forwarded %v, was asked for %v", tunnelled, named, forwarded, unrouted)
		}
		requireHostsAll(t, up, named)
	})

	t.Run("HTTP_PROXY only", func(t *testing.T) {
		_, before, _ := proxy.seen(named)
		h := remoteEchoHub(t, url, withEnv("HTTP_PROXY="+proxyURL, "SSL_CERT_FILE="+ca.CertFile)...)
		requireUnreached(t, h, "lookup "+upstreamHost)
		if _, after, _ := proxy.seen(named); after != before {
			t.Fatalf("the proxy tunnelled %d for an https:// server with only HTTP_PROXY set", after-before)
		}
	})
}

// requireHostsAll checks the upstream was sent requests, each by the name
// the proxy resolved: none reached it any other way.
func requireHostsAll(t *testing.T, up *echoUpstream, named string) {
	t.Helper()
	hosts := up.seenHosts()
	if len(hosts) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, host := range hosts {
		if host != named {
			t.Fatalf("the upstream was sent Host %q, want %q", host, named)
		}
	}
}
