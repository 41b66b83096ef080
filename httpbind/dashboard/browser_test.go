package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jetgate/jetgate/cmd/jetgate/app"
)

// chromiumNames are the browser binaries the browser test looks for on
// PATH, after $JETGATE_CHROMIUM. Debian's package chromium installs
// /usr/bin/chromium (.ci/run installs it when missing).
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless-shell"}

func findChromium() string {
	if p := os.Getenv("JETGATE_CHROMIUM"); p != "" {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	for _, n := range chromiumNames {
		if path, err := exec.LookPath(n); err == nil {
			return path
		}
	}
	return ""
}

// Issue 19, "Dashboard ... tested in a real headless browser": headless
// Chromium loads the page (signing in with ?token=, which the page trades
// for its cookie), a job enqueued over HTTP changes its queue row's depth
// in the DOM through the SSE stream, and a screenshot is saved
// ($JETGATE_SCREENSHOT_DIR, else the test's temp dir) and checked to be a
// PNG. It skips only when no Chromium binary is found: run `task
// test:browser`, which installs Debian's chromium first.
func TestBrowserSeesQueueDepthChange(t *testing.T) {
	t.Parallel()
	browser := findChromium()
	if browser == "" {
		t.Skipf("no Chromium binary found (looked for $JETGATE_CHROMIUM and %v on PATH): "+
			"install Debian's chromium (apt-get install -y chromium) or run `task test:browser`", chromiumNames)
	}
	began := time.Now()
	const admin = "browser-admin-token-5e1f"
	s := start(t, app.Config{AdminTokens: []string{admin}})
	s.token = admin
	seedForScreenshot(t, s)
	s.enqueue("browser", map[string]any{"priority": 2})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx,
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(browser),
			chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
			chromedp.Flag("disable-gpu", true),
			chromedp.WindowSize(1400, 1000),
		)...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	defer func() { _ = chromedp.Cancel(bctx) }() // closes the browser and waits for it

	depth := func(want int) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](fmt.Sprintf(
			`document.querySelector('tr[data-queue="browser"] td[data-field="depth"]')?.textContent === %q`,
			strconv.Itoa(want)), chromedp.WithPollingTimeout(20*time.Second))
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(s.base+"/?token="+admin),
		depth(1),
		chromedp.Poll[chromedp.Void](`document.getElementById("conn").dataset.state === "live"`,
			chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("load the dashboard and see queue browser at depth 1: %v", err)
	}
	loaded := time.Since(began)
	href, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href`))
	if err != nil || href != s.base+"/" {
		t.Fatalf("page URL %q (%v), want %s/ without the token", href, err, s.base)
	}

	enqueued := time.Now()
	id := s.enqueue("browser", map[string]any{"priority": 2})
	if err := chromedp.Do(bctx, depth(2)); err != nil {
		t.Fatalf("queue browser's depth did not change to 2 in the DOM: %v", err)
	}
	changed := time.Since(enqueued)
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`[...document.querySelectorAll("#events li .s")].some(e => e.textContent.includes(%q))`, id),
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the job's event is not in the recent events: %v", err)
	}

	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() < 800 || img.Bounds().Dy() < 400 {
		t.Fatalf("screenshot is not a PNG of the page: %v (%d bytes)", err, len(shot))
	}
	dir := os.Getenv("JETGATE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("page live in %s, depth changed in the DOM %s after the enqueue; screenshot %s (%dx%d, %d bytes); %s in all",
		loaded.Round(time.Millisecond), changed.Round(time.Millisecond), path, img.Bounds().Dx(), img.Bounds().Dy(),
		len(shot), time.Since(began).Round(time.Millisecond))
}

// seedForScreenshot gives the page something to show beside queue browser:
// a bound, priority levels, a paused queue and a rate-limit key with
// running and waiting jobs.
func seedForScreenshot(t *testing.T, s *server) {
	t.Helper()
	s.must(200, "PUT", "/ojs/v1/admin/queues/browser/config",
		map[string]any{"backpressure": map[string]any{"max_depth": 5, "strategy": "reject"}})
	for _, p := range []int{0, 0, 5} {
		s.enqueue("reports", map[string]any{"priority": p})
	}
	s.must(200, "POST", "/ojs/v1/queues/reports/pause", nil)
	rl := map[string]any{"key": "tenant:acme", "concurrency": 2, "rate": map[string]any{"limit": 10, "period": "PT1M"}}
	for range 3 {
		s.enqueue("emails", map[string]any{"rate_limit": rl})
	}
	for range 2 {
		if s.fetch("emails") == nil {
			t.Fatal("no emails job fetched")
		}
	}
	if j := s.fetch("emails"); j != nil { // the third waits on tenant:acme
		t.Fatalf("RL-001: a third job started on concurrency 2: %v", j["id"])
	}
}
