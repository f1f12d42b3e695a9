//go:build linux

package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raftlock/raftlock/internal/testing/replicaproc"
)

// chromium returns the browser to drive, or skips the test.
func chromium(t *testing.T) string {
	if p := os.Getenv("RAFTLOCK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (Debian: apt-get install chromium; or set RAFTLOCK_CHROMIUM)")
	return ""
}

// browser starts headless Chromium (as root: no sandbox) with a fresh
// profile.
func browser(t *testing.T) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

func shotsDir(t *testing.T) string {
	if d := os.Getenv("RAFTLOCK_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// screenshot saves a PNG of the whole page.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// text returns the rendered text of the element sel ("" if absent or
// hidden).
func text(ctx context.Context, sel string) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+jsString(sel)+`); return e && !e.hidden ? e.innerText : ""; })()`))
	return s
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }

// waitText waits until the text of sel contains every one of want.
func waitText(t *testing.T, ctx context.Context, timeout time.Duration, sel string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := text(ctx, sel)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(got, w)
		}
		if ok {
			return got
		}
		if time.Now().After(deadline) {
			page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("%s: %q lacks %q after %v; the page:\n%s", sel, got, want, timeout, page)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAbsent waits until the element sel is hidden or empty.
func waitAbsent(t *testing.T, ctx context.Context, timeout time.Duration, sel string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for got := text(ctx, sel); got != ""; got = text(ctx, sel) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still shows %q after %v", sel, got, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// acquire asks replica r's API for a client-kept lease (wait: queue).
func acquire(t *testing.T, r *replicaproc.Replica, body string) (*http.Response, error) {
	req, _ := http.NewRequest("POST", "http://"+r.HTTP+"/v1/acquire", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+replicaproc.Token)
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// TestStatusPageInABrowser: the page of r1 first asks for a token (a
// prompt, not the red "does not answer" of a node that is down), then
// renders the cluster (members, fault tolerance, a held lock with its
// holder and a waiter labelled with its place and session, a semaphore's
// permits and their holders, a read lock's readers); when a follower dies
// it warns that one more failure stops all grants; when the other replica
// dies too, r1 has no quorum and a red banner says it is not ready.
func TestStatusPageInABrowser(t *testing.T) {
	ctx := browser(t)
	dir := shotsDir(t)
	reps := replicaproc.Start(t, 3)
	r1, r2, r3 := reps[0], reps[1], reps[2] // the page is r1's

	resp, err := acquire(t, r2, `{"lock":"invoice:842","ttl_ms":120000,"owner":"billing worker 7"}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, body := range []string{
		`{"lock":"pool:gpu","limit":3,"permits":2,"ttl_ms":120000,"owner":"gpu worker 1"}`,
		`{"lock":"doc:7","shared":true,"ttl_ms":120000,"owner":"reader A"}`,
		`{"lock":"doc:7","shared":true,"ttl_ms":120000,"owner":"reader B"}`,
	} {
		resp, err := acquire(t, r3, body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("acquire %s: %v %v", body, resp, err)
		}
		resp.Body.Close()
	}
	waiterCtx, cancelWaiter := context.WithCancel(context.Background())
	defer cancelWaiter()
	go func() {
		req, _ := http.NewRequestWithContext(waiterCtx, "POST", "http://"+r1.HTTP+"/v1/acquire",
			strings.NewReader(`{"lock":"invoice:842","wait":true,"timeout_ms":120000,"ttl_ms":120000,"owner":"billing worker 9"}`))
		req.Header.Set("Authorization", "Bearer "+replicaproc.Token)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()

	// The page holds no data: it asks for the token — as a prompt, not as
	// a node that does not answer — then renders.
	if err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+r1.HTTP+"/"),
		chromedp.WaitVisible(chromedp.ID("login")),
	); err != nil {
		t.Fatal(err)
	}
	prompt := waitText(t, ctx, 30*time.Second, "#banner", "enter a token")
	if strings.Contains(prompt, "does not answer") {
		t.Errorf("first visit: the banner says %q", prompt)
	}
	if bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.getElementById("banner")).backgroundColor`)); err != nil || bg == "rgb(220, 38, 38)" {
		t.Errorf("first visit: the token prompt %q is red (%s, %v)", prompt, bg, err)
	}
	screenshot(t, ctx, dir, "status-0-token.png")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), replicaproc.Token),
		chromedp.Click(chromedp.CSS("#login button")), // as a user would (form.submit() skips the submit event)
	); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, 30*time.Second, "#fault", "3 of 3 voters up: survives one more failure")
	members := waitText(t, ctx, 30*time.Second, "#members", "r1", "r2", "r3", "leader")
	if strings.Count(members, "\n") != 2 {
		t.Errorf("members table: want 3 rows:\n%s", members)
	}
	waitText(t, ctx, 30*time.Second, "#locks", "invoice:842", "billing worker 7 (#", "1. billing worker 9 (#", "waiting", "(TTL 2.0 min)")
	// Semaphores and read locks name their holders (the holder column said
	// "—", which reads as free).
	waitText(t, ctx, 30*time.Second, "#locks", "pool:gpu", "semaphore, 2 of 3 permits held: gpu worker 1 (#", ": 2 permits",
		"doc:7", "read by 2: reader A (#", "reader B (#")
	if b := text(ctx, "#banner"); b != "" {
		t.Errorf("banner shown on a healthy cluster: %q", b)
	}
	if s := text(ctx, "#summary"); !strings.Contains(s, "leader r") || !strings.Contains(s, "locks held · 2 read grants · 2 permits held of 1 semaphores") {
		t.Errorf("summary: %q", s)
	}
	screenshot(t, ctx, dir, "status-1-healthy.png")

	// A follower dies (not the leader: no election, so r1 stays ready
	// throughout): the page warns, without the red banner.
	first, second := r3, r2
	if replicaproc.Leader(t, reps) == r3 {
		first, second = r2, r3
	}
	first.Kill()
	waitText(t, ctx, 60*time.Second, "#fault", "2 of 3 voters up: one more failure stops all grants")
	waitText(t, ctx, 30*time.Second, "#warnings", "Warnings", "voter "+first.ID+" does not answer")
	// With two of three up r1 is ready: no red banner (once an election
	// that the loss may have started — or a loaded machine's, with the
	// 50 ms test timing — is over).
	waitAbsent(t, ctx, 30*time.Second, "#banner")
	screenshot(t, ctx, dir, "status-2-one-down.png")

	// The other one dies too: no quorum, r1 is not ready: the red banner.
	second.Kill()
	banner := waitText(t, ctx, 60*time.Second, "#banner", "not ready")
	bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.getElementById("banner")).backgroundColor`))
	if err != nil {
		t.Fatal(err)
	}
	if bg != "rgb(220, 38, 38)" {
		t.Errorf("banner %q: background %s, want red rgb(220, 38, 38)", banner, bg)
	}
	waitText(t, ctx, 30*time.Second, "#fault", "no quorum")
	title, _ := chromedp.Run(ctx, chromedp.Title())
	if !strings.Contains(title, "NOT READY") {
		t.Errorf("title %q does not say NOT READY", title)
	}
	screenshot(t, ctx, dir, "status-3-no-quorum.png")
	cancelWaiter()
}
