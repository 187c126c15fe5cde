package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The browser suites drive Debian's chromium, headless, from Go. They fail,
// never skip, where it is missing: scripts/test.sh installs it, and a run
// that did not test the screen must not read as one that did.

// chromiumPath finds the browser, or fails the test saying how to get it.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CREWLET_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: `apt-get install -y chromium` (scripts/test.sh does), or set CREWLET_CHROMIUM to its path")
	return ""
}

// browser is one headless chromium for a test, with one tab, and where its
// screenshots go.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

// newBrowser starts chromium for the test's life. Screenshots go to a
// directory under the test's temporary directory, which the test names in
// its log; with CREWLET_SCREENSHOTS_DIR set they are copied there at the
// end, for CI or a person to keep.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		// The machine runs tests as root, where chromium's sandbox cannot
		// start; the pages it loads are the test's own.
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, under no deadline of its own.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	b := &browser{t: t, ctx: ctx, shots: filepath.Join(t.TempDir(), "screenshots")}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", b.shots)
	if keep := os.Getenv("CREWLET_SCREENSHOTS_DIR"); keep != "" {
		// Registered after TempDir's own cleanup, so it runs first.
		t.Cleanup(func() { copyShots(t, b.shots, filepath.Join(keep, t.Name())) })
	}
	return b
}

func copyShots(t *testing.T, from, to string) {
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Errorf("keeping screenshots: %v", err)
		return
	}
	entries, _ := os.ReadDir(from)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(to, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Errorf("keeping screenshot %s: %v", e.Name(), err)
		}
	}
	t.Logf("screenshots kept in %s", to)
}

// stepTimeout bounds each step: a selector that never appears fails the
// test in this time, with what the page shows.
const stepTimeout = 20 * time.Second

// do runs steps within the step bound, failing the test with what was
// being done and a screenshot of how the page looked.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, b.text("body"))
	}
}

// text is the visible text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// eval runs JavaScript and answers its value.
func evalIn[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// shot saves a full-page screenshot as name.png.
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}

// cookies are the browser's cookies for a URL.
func (b *browser) cookies(url string) []*network.Cookie {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	cs, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
		return res.Cookies, err
	})
	if err != nil {
		b.t.Fatalf("cookies: %v", err)
	}
	return cs
}

// waitFor polls a JavaScript condition until it holds.
func waitFor(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return chromedp.Void{}, err
	}
}

// css is a CSS selector for the query actions.
func css(format string, args ...any) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(format, args...)) }
