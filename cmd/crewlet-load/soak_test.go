package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/crewlet/hub/authority"
	"github.com/crewlet/hub/hub/config"
	"github.com/crewlet/hub/servers"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rejected is the go-sdk's error for a request its transport refused.
var rejected = &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}

// The soak's company gives every group of clients a credential of its own,
// each from its own variable, and the HTTP echo as the one server.
func TestSoakCompanyIsAValidCompany(t *testing.T) {
	c, err := config.Parse([]byte(soakCompany("http://127.0.0.1:9/mcp", 3)))
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := c.OperatorTokens(func(k string) (string, bool) { return "secret-of-" + k, strings.HasPrefix(k, tokenVar+"_") })
	if err != nil || len(tokens) != 3 {
		t.Fatalf("operator tokens %+v, %v", tokens, err)
	}
	for k, tok := range tokens {
		if want := fmt.Sprintf("secret-of-%s_%d", tokenVar, k); tok.Secret != want || !tok.Admin {
			t.Errorf("token %d: %+v, want secret %s and admin", k, tok, want)
		}
	}
	if len(c.MCPServers) != 1 || c.MCPServers[0].URL != "http://127.0.0.1:9/mcp" {
		t.Fatalf("servers %+v", c.MCPServers)
	}
}

// A refusal the hub documents is told from a failure: a refusal class of
// the hub's, or an HTTP 429 or 503; a timeout, a broken connection and an
// isError without a class are failures.
func TestClassifyTellsRefusalsFromFailures(t *testing.T) {
	refused := servers.Refused(authority.Refuse(authority.NotFound, "No item SOAK-9."))
	for _, c := range []struct {
		res  *mcp.CallToolResult
		err  error
		want string
	}{
		{&mcp.CallToolResult{}, nil, ""},
		{refused, nil, refusalPrefix + string(authority.NotFound)},
		{&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil, outcomeToolError},
		{nil, fmt.Errorf("calling tools/call: %w", context.DeadlineExceeded), outcomeTimeout},
		{nil, errors.New(`sending "tools/call": broken pipe`), outcomeTransport},
		// As the go-sdk client words a POST refused 429 or 503.
		{nil, fmt.Errorf("%w: %s: %v", rejected, `sending "tools/call"`, http.StatusText(http.StatusTooManyRequests)), refusalPrefix + "HTTP 429"},
		{nil, fmt.Errorf("%w: %s: %v", rejected, `sending "tools/call"`, http.StatusText(http.StatusServiceUnavailable)), refusalPrefix + "HTTP 503"},
		{nil, errors.New("something else"), outcomeOther},
	} {
		if got := classify(c.res, c.err); got != c.want {
			t.Errorf("classify(%v, %v) = %q, want %q", c.res, c.err, got, c.want)
		}
	}
}

// A short soak on a real hub: idle and active clients on both revisions,
// a line per interval, no call failing, and every session reclaimed once
// the clients leave without a word.
func TestSoakRunsAndReclaims(t *testing.T) {
	hubBin := hubBinary(t)
	var out bytes.Buffer
	soakOut = &out
	defer func() { soakOut = os.Stdout }()
	err := soak(context.Background(), []string{"--hub-binary", hubBin, "--idle-sessions", "24", "--active", "8", "--rate", "40",
		"--duration", "3s", "--interval", "1s", "--warmup", "1s", "--baseline", "1s", "--baseline-sessions", "4",
		"--clients-per-token", "5", "--session-idle", "3s"})
	printed := out.String()
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, printed)
	}
	rows := regexp.MustCompile(`(?m)^  (base|\d+)\s+\|\s+(\d+)/(\d+)/(\d+) `).FindAllStringSubmatch(printed, -1)
	if len(rows) < 3 || rows[0][1] != "base" {
		t.Fatalf("%d lines of figures, want the baseline's and one an interval:\n%s", len(rows), printed)
	}
	answered := 0
	for _, r := range rows {
		var n int
		fmt.Sscan(r[2], &n)
		answered += n
		if r[4] != "0" {
			t.Errorf("window %s: %s forwarded calls failed", r[1], r[4])
		}
	}
	if answered == 0 {
		t.Errorf("no forwarded call answered:\n%s", printed)
	}
	for _, want := range []string{
		"24 idle open (after a collection)", "32 clients open", "forwarded p99:", "resident memory per idle session (24 open)",
		"failed 0;", "every session reclaimed",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("the soak did not print %q:\n%s", want, printed)
		}
	}
	if !regexp.MustCompile(`after leaving: rss [\d.]+ MiB \(before the clients [\d.]+ MiB; anonymous [\d.]+ and [\d.]+ MiB, the rest mapped files\), \d+ goroutines, 0 sessions`).MatchString(printed) {
		t.Errorf("no closing line with every session gone:\n%s", printed)
	}
	if kids := childGroups(os.Getpid()); len(kids) != 0 {
		t.Fatalf("the soak left processes behind: %v", kids)
	}
}
