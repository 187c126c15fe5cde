package serve

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tlsHub runs the embedded company over HTTPS with a pair the test's CA
// issued (serial 1), and hands back its base URL, the reload channel and
// the pair's paths.
type tlsHub struct {
	base              string
	ca                *hubtest.CA
	certFile, keyFile string
	reload            chan os.Signal
	log               *syncBuffer
}

func runTLS(t *testing.T, l HTTPLimits) *tlsHub {
	t.Helper()
	dir := t.TempDir()
	h := &tlsHub{ca: hubtest.NewCA(t), certFile: filepath.Join(dir, "hub.pem"), keyFile: filepath.Join(dir, "hub-key.pem"),
		reload: make(chan os.Signal, 1), log: &syncBuffer{}}
	h.ca.Issue(t, 1, h.certFile, h.keyFile)
	env := func(k string) (string, bool) { return limitsToken, k == "CREWLET_OPERATOR_TOKEN" }
	base, out, stop := runUntilListening(t, Options{DataDir: t.TempDir(), LookupEnv: env, HTTP: l, Reload: h.reload,
		TLS: TLSFiles{CertFile: h.certFile, KeyFile: h.keyFile}, Logger: slog.New(slog.NewJSONHandler(h.log, nil))})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(out.String(), "MCP endpoint: https://") {
		t.Fatalf("the banner does not give an https endpoint:\n%s", out)
	}
	h.base = strings.Replace(base, "http://", "https://", 1)
	return h
}

// servedSerial is the serial number of the certificate a new handshake
// with the hub presents.
func (h *tlsHub) servedSerial(t *testing.T) int64 {
	t.Helper()
	u, _ := url.Parse(h.base)
	c, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: h.ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// Issue 36 (finding 10): every answer served over TLS carries
// Strict-Transport-Security with a year's max-age: a route without a
// token, a refusal, the protected-resource document and the screen.
func TestHSTSOverTLS(t *testing.T) {
	h := runTLS(t, HTTPLimits{})
	c := h.ca.Client("")
	for _, path := range []string{"/healthz", "/tools", "/operator/mcp", "/.well-known/oauth-protected-resource", "/settings/mcp-tools", "/nowhere"} {
		resp, err := c.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("GET %s over TLS answered %s with Strict-Transport-Security %q, want max-age=31536000", path, resp.Status, got)
		}
	}
}

// Issue 25 (TLS): `serve` with a certificate and key answers MCP clients
// over HTTPS, HTTP/2 included; a plain HTTP request to it is refused.
func TestServeOverTLS(t *testing.T) {
	h := runTLS(t, HTTPLimits{})

	resp, err := h.ca.Client("").Get(h.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("healthz over TLS: %s %s, want 200 over HTTP/2", resp.Proto, resp.Status)
	}

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cs, err := hubtest.DialClient(t, h.base+"/operator/mcp", h.ca.Client(limitsToken), version, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_projects", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("list_projects over HTTPS: %v %s", err, hubtest.Text(res))
			}
			if !strings.Contains(hubtest.Text(res), "CORE") {
				t.Fatalf("list_projects over HTTPS answered %s", hubtest.Text(res))
			}
		})
	}

	plain := strings.Replace(h.base, "https://", "http://", 1)
	if resp, err := http.Get(plain + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a plain HTTP request to the HTTPS listener was answered 200")
		}
	}
}

// Issue 25 (TLS): a reload reads the pair again, so a renewed certificate
// is served without a restart; a pair that no longer loads leaves the one
// in force, and says so in the log.
func TestTLSReloadsThePairOnSIGHUP(t *testing.T) {
	h := runTLS(t, HTTPLimits{})
	if got := h.servedSerial(t); got != 1 {
		t.Fatalf("serial %d served, want 1", got)
	}

	h.ca.Issue(t, 2, h.certFile, h.keyFile)
	h.reload <- nil
	waitFor(t, "the renewed certificate served", func() bool { return h.servedSerial(t) == 2 })

	if err := os.WriteFile(h.certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.reload <- nil
	waitFor(t, "the failed reload logged", func() bool { return strings.Contains(h.log.String(), "tls_reload_failed") })
	if got := h.servedSerial(t); got != 2 {
		t.Fatalf("after a failed reload serial %d is served, want the pair in force (2)", got)
	}
}

// Issue 25 (TLS): half a pair is refused at start with a sentence naming
// both flags, rather than serving plain HTTP where HTTPS was meant.
func TestTLSHalfAPairIsRefused(t *testing.T) {
	err := Run(context.Background(), Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Stdout: io.Discard,
		TLS: TLSFiles{CertFile: filepath.Join(t.TempDir(), "hub.pem")}})
	if err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("Run with a certificate and no key: %v", err)
	}
}

// Issue 25 (TLS): the company file's api.tls names the pair, relative to
// the file's own directory.
func TestTLSFromTheCompanyFile(t *testing.T) {
	dir := t.TempDir()
	ca := hubtest.NewCA(t)
	ca.Issue(t, 7, filepath.Join(dir, "hub.pem"), filepath.Join(dir, "hub-key.pem"))
	cfg := filepath.Join(dir, "company.yaml")
	if err := os.WriteFile(cfg, []byte("company: {name: Acme}\napi:\n  tls: {cert_file: hub.pem, key_file: hub-key.pem}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, out, stop := runUntilListening(t, Options{DataDir: t.TempDir(), ConfigFile: cfg})
	t.Cleanup(func() { _ = stop() })
	if !strings.Contains(out.String(), "MCP endpoint: https://") {
		t.Fatalf("banner:\n%s", out)
	}
	resp, err := ca.Client("").Get(strings.Replace(base, "http://", "https://", 1) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %s", resp.Status)
	}
}

// Issue 25 (TLS): the screen's sign-in cookie is Secure over HTTPS, so a
// browser never sends it over plain HTTP.
func TestScreenCookieIsSecureOverTLS(t *testing.T) {
	h := runTLS(t, HTTPLimits{})
	c := h.ca.Client("")
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest("POST", h.base+"/settings/mcp-tools/sign-in", bytes.NewBufferString(url.Values{"token": {limitsToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) == 0 {
		t.Fatalf("sign-in over HTTPS: %s, cookies %v", resp.Status, cookies)
	}
	for _, ck := range cookies {
		if !ck.Secure {
			t.Errorf("cookie %s is not Secure over HTTPS", ck.Name)
		}
	}
}

// waitFor polls cond, which observes an event the test caused, for up to
// 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not seen within 10s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
