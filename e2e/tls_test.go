package e2e_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/crewlet/hub/hub/hubtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 25 (TLS): `crewlet serve --tls-cert … --tls-key …` answers MCP
// clients over HTTPS: the go-sdk client, the TypeScript SDK and the
// Inspector CLI (Node trusting the test's CA through NODE_EXTRA_CA_CERTS),
// and curl, which is answered over HTTP/2.
func TestHubOverTLS(t *testing.T) {
	h := startHubTLS(t, []string{"CREWLET_OPERATOR_TOKEN="})
	if !strings.Contains(strings.Join(h.stdout, "\n"), "MCP endpoint: https://") {
		t.Fatalf("the banner does not give an https endpoint: %q", h.stdout)
	}

	t.Run("go-sdk", func(t *testing.T) {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			cs, err := hubtest.DialClient(t, h.mcpURL(), h.ca.Client(h.token), version, nil)
			if err != nil {
				t.Fatalf("%s: %v", version, err)
			}
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "list_projects", Arguments: map[string]any{}})
			if err != nil || res.IsError || !strings.Contains(hubtest.Text(res), "CORE") {
				t.Fatalf("%s: list_projects over HTTPS: %v %s", version, err, hubtest.Text(res))
			}
		}
	})

	t.Run("typescript-sdk", func(t *testing.T) {
		out := runTSClientRaw(t, h.mcpURL(), h.token, []tsCall{{Name: "list_projects", Arguments: map[string]any{}}},
			"NODE_EXTRA_CA_CERTS="+h.ca.CertFile)
		if out.ConnectError != "" {
			t.Fatalf("the TypeScript SDK could not connect over HTTPS: %s", out.ConnectError)
		}
		if r := out.Results[0]; r.Threw() || !strings.Contains(r.Text(), "CORE") {
			t.Fatalf("list_projects from the TypeScript SDK over HTTPS: %+v", r)
		}
		// Without the CA the same client refuses the hub's certificate.
		if out := runTSClientRaw(t, h.mcpURL(), h.token, nil); !strings.Contains(out.ConnectError, "certificate") {
			t.Fatalf("the TypeScript SDK without the test's CA: connect error %q, want the certificate refused", out.ConnectError)
		}
	})

	t.Run("inspector-cli", func(t *testing.T) {
		inspector := filepath.Join(npmInstalled(t), ".bin", "mcp-inspector")
		cmd := exec.CommandContext(ctxT(t), pinnedNode(t), inspector, "--cli", h.mcpURL(), "--transport", "http",
			"--header", "Authorization: Bearer "+h.token, "--method", "tools/call", "--tool-name", "list_projects")
		cmd.Env = nodeEnv(t, "NODE_EXTRA_CA_CERTS="+h.ca.CertFile)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("inspector over HTTPS: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
		}
		var res struct {
			IsError bool `json:"isError"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.IsError || !strings.Contains(stdout.String(), "CORE") {
			t.Fatalf("inspector's call over HTTPS answered %s (%v)", stdout.String(), err)
		}
	})

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Fatal("curl not found: apt-get install -y curl")
		}
		out, err := exec.Command("curl", "-sS", "--cacert", h.ca.CertFile, "-w", "\n%{http_version}",
			h.baseURL()+"/healthz").CombinedOutput()
		if err != nil {
			t.Fatalf("curl over HTTPS: %v\n%s", err, out)
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); lines[len(lines)-1] != "2" {
			t.Fatalf("curl was answered over HTTP/%s, want 2:\n%s", lines[len(lines)-1], out)
		}
		if out, err := exec.Command("curl", "-sS", h.baseURL()+"/healthz").CombinedOutput(); err == nil {
			t.Fatalf("curl accepted the hub's certificate without the CA:\n%s", out)
		}
	})
}

// Issue 25 (TLS): the screen over HTTPS in chromium, which trusts the hub's
// certificate alone: sign-in sets a Secure cookie, and the screen loads.
func TestScreenOverTLSInChromium(t *testing.T) {
	h := startHubTLS(t, []string{"CREWLET_OPERATOR_TOKEN="})
	b := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", hubtest.SPKIPin(t, h.certFile)))
	base := h.baseURL() + "/settings/mcp-tools"
	b.do("open the hub over HTTPS", chromedp.Navigate(h.baseURL()+"/"), chromedp.WaitVisible(css("#sign-in")))
	b.do("sign in", chromedp.SendKeys(css("#token"), h.token), chromedp.Submit(css("#sign-in")),
		chromedp.WaitVisible(css(`section[data-source="builtin"]`)))
	b.shot("01-signed-in-over-https")
	var session *network.Cookie
	for _, c := range b.cookies(base) {
		if c.Name == "crewlet_session" {
			session = c
		}
	}
	if session == nil || !session.Secure || !session.HTTPOnly {
		t.Fatalf("session cookie over HTTPS %+v, want Secure and HttpOnly", session)
	}
	if loc := evalIn[string](b, "location.protocol"); loc != "https:" {
		t.Fatalf("the screen is on %s", loc)
	}
}
