package web_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tab is a headless Chromium tab for the page's browser tests.
type tab struct {
	t   *testing.T
	ctx context.Context // the tab's chromedp context
}

// newTab starts headless Chromium (chromium, in a fresh profile, with
// the extra options) under ctx and opens one tab; both end with the test.
func newTab(ctx context.Context, t *testing.T, extra ...chromedp.ExecAllocatorOption) *tab {
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.WindowSize(1280, 900)}
	opts = append(opts, extra...)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return &tab{t: t, ctx: bctx}
}

// eval evaluates js in the page, awaiting a promise, and decodes its JSON
// value into out unless out is nil; an error fails the test.
func (b *tab) eval(js string, out any) {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("%s: %s: %v", js, raw, err)
		}
	}
}

// waitFor polls js until it is true, and fails the test with the page's
// error, statuses and first events if it is not within limit.
func (b *tab) waitFor(what, js string, limit time.Duration) {
	b.t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		var ok bool
		b.eval(js, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var e any
			b.eval(`window.privrecPage ? [window.privrecPage.error, document.getElementById("run-status").textContent, `+
				`document.getElementById("train-status").textContent, JSON.stringify(window.privrecPage.events).slice(0, 1500)] : null`, &e)
			b.t.Fatalf("%s: not after %v (page error, run status, train status, events: %v)", what, limit, e)
		}
	}
}
