package serve

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewlet/hub/hub/hubtest"
	"github.com/crewlet/hub/servers/search/searchtest"
	"go.uber.org/goleak"
)

// Everything Run opens it closes before it returns. Started as a seat's
// per-role child (deskVar set), the test binary is that child instead.
func TestMain(m *testing.M) {
	if os.Getenv(deskVar) == "1" {
		serveDesk()
		return
	}
	goleak.VerifyTestMain(m, searchtest.LeakOptions()...)
}

// syncBuffer is the banner's writer, read while Run writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runUntilListening starts Run and waits for its banner's last line.
func runUntilListening(t testing.TB, o Options) (base string, out *syncBuffer, stop func() error) {
	t.Helper()
	out = &syncBuffer{}
	o.Stdout, o.Listen = out, "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not return within 20s of its context ending")
			return nil
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "MCP endpoint:") {
		select {
		case err := <-done:
			t.Fatalf("Run returned before listening: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = stop()
			t.Fatal("no banner within 20s")
		}
	}
	addr, err := os.ReadFile(filepath.Join(o.DataDir, "listen-addr"))
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + strings.TrimSpace(string(addr)), out, stop
}

// A company file with no operator credential gets the generated one,
// kept in the data directory and printed where it is; it administers.
func TestRunGeneratesACredentialForACompanyWithNone(t *testing.T) {
	dir := t.TempDir()
	cfg := hubtest.NewCompany().Server(`{name: ghost, command: /nonexistent/bin/mcp-ghost}`).Write(t)
	base, out, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: dir,
		LookupEnv: func(string) (string, bool) { return "", false }})
	tokenFile := filepath.Join(dir, TokenFile)
	b, err := os.ReadFile(tokenFile)
	token := strings.TrimSpace(string(b))
	if fi, serr := os.Stat(tokenFile); err != nil || serr != nil || fi.Mode().Perm() != 0o600 || len(token) < 32 {
		t.Fatalf("operator-token: %v %v", err, serr)
	}
	if !strings.Contains(out.String(), tokenFile) || strings.Contains(out.String(), token) {
		t.Fatalf("banner:\n%s", out)
	}
	for _, route := range []string{"/tools", "/mcp-servers"} {
		resp, err := hubtest.Client(token).Get(base + route)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s with the generated token: %v %v", route, resp, err)
		}
		resp.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// The embedded company runs with the token from the environment when it
// is set, and `config check` says a file without credentials gets one.
func TestRunEmbeddedCompanyTakesTheEnvironmentsToken(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) (string, bool) { return "env-token-0123456789abcdef", k == "CREWLET_OPERATOR_TOKEN" }
	base, out, stop := runUntilListening(t, Options{DataDir: dir, LookupEnv: env})
	if !strings.Contains(out.String(), "from $CREWLET_OPERATOR_TOKEN") {
		t.Fatalf("banner:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, TokenFile)); !os.IsNotExist(err) {
		t.Fatalf("a token file was written although the environment had one: %v", err)
	}
	resp, err := hubtest.Client("env-token-0123456789abcdef").Get(base + "/tools")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /tools: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	cfg := hubtest.NewCompany().Server(`{name: ghost, command: x}`).Write(t)
	if code := CheckFile(&stdout, &stderr, cfg, t.TempDir(), func(string) (string, bool) { return "", false }); code != 0 ||
		!strings.Contains(stdout.String(), "no operator credential") || stderr.Len() > 0 {
		t.Fatalf("config check: %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

// Issue 40: a server waiting for a ${VAR} nobody set is said in the start
// banner, as a seat without a model is, with the command that supplies it.
func TestBannerNamesAServerWaitingForAVariable(t *testing.T) {
	dir := t.TempDir()
	cfg := hubtest.NewCompany().Server(`{name: memory, command: /nonexistent/bin/mcp-memory, env: {MEMORY_FILE_PATH: "${MEMORY_FILE}"}}`).Write(t)
	_, out, stop := runUntilListening(t, Options{ConfigFile: cfg, DataDir: dir, LookupEnv: func(string) (string, bool) { return "", false }})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	banner := out.String()
	line := ""
	for _, l := range strings.Split(banner, "\n") {
		if strings.Contains(l, "${MEMORY_FILE}") {
			line = l
		}
	}
	if !strings.Contains(line, "(memory)") || !strings.Contains(line, "crewlet secrets set MEMORY_FILE --data-dir "+dir) ||
		!strings.HasSuffix(strings.TrimSpace(banner), "/operator/mcp") {
		t.Fatalf("the banner does not name the waiting server, its variable and how to set it:\n%s", banner)
	}
}
