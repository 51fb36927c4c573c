package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowser_Screenshots shows a busy workbench — several sessions, one
// streaming a Markdown answer, one waiting for an approval, one failed, one
// completed — at 1400 × 900 and at 400 × 800 (the list folded, the
// needs-you badges showing the approval), and checks each capture is a PNG
// of that size. With RUNHUB_SCREENSHOTS_DIR set it writes them there:
//
//	RUNHUB_SCREENSHOTS_DIR=$PWD/docs/screenshots go test ./cmd/hub -run TestBrowser_Screenshots
//
// is how docs/screenshots/*.png are made.
func TestBrowser_Screenshots(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	done := httpSession(t, base, "Refactor the journal writer")
	r := httpRun(t, base, done, "Explain the group commit in journal/bolt", map[string]any{"markdown": true, "token_ms": 0, "tools": 2})
	waitRunEnd(t, base, r)
	failed := httpSession(t, base, "Fix the flaky reconnect test")
	r = httpRun(t, base, failed, "Find why TestReconnect flakes", map[string]any{"tokens": 30, "token_ms": 0, "tools": 1, "fail": "error"})
	waitRunEnd(t, base, r)
	asks := httpSession(t, base, "Rotate the staging credentials")
	httpRun(t, base, asks, "Rotate the staging database password", map[string]any{"tokens": 20, "token_ms": 20, "tools": 1, "approval": true})
	busy := httpSession(t, base, "Benchmark the Redis journal")
	httpRun(t, base, busy, "Run the load test against Redis", map[string]any{"tokens": 100000, "token_ms": 80, "tools": 0})
	live := httpSession(t, base, "Draft the release notes")
	rid := httpRun(t, base, live, "Draft the release notes for v1.4 with a code sample", map[string]any{"markdown": true, "token_ms": 110, "reasoning": 12, "tools": 1})

	w.focusByHash(live)
	waitJS[bool](w, "the approval waiting and the answer streaming past its list",
		jsBadge(asks)+` === "awaiting_approval" && `+jsRunText(rid)+`.includes("fmt.Println")`, stateTimeout)
	shoot := func(name string, width, height int64) {
		t.Helper()
		w.do("resize to "+name, chromedp.EmulateViewport(width, height))
		waitJS[bool](w, "the layout at "+name, `innerWidth === `+jsq(name)+`.split("x")[0] * 1`, stateTimeout)
		evalJS[bool](w, "follow the stream", `(document.getElementById("transcript-scroll").scrollTop = 1e9, true)`)
		buf := evalShot(w)
		img, err := png.Decode(bytes.NewReader(buf))
		if err != nil {
			w.fatal("screenshot %s: %v", name, err)
		}
		if b := img.Bounds(); int64(b.Dx()) != width || int64(b.Dy()) != height {
			w.fatal("screenshot %s is %v, want %dx%d", name, b, width, height)
		}
		if dir := os.Getenv("RUNHUB_SCREENSHOTS_DIR"); dir != "" {
			path := filepath.Join(dir, "workbench-"+name+".png")
			if err := os.WriteFile(path, buf, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s (%d bytes)", path, len(buf))
		}
	}
	shoot("1400x900", 1400, 900)
	// On a phone the list folds away once a session is picked.
	w.do("resize", chromedp.EmulateViewport(400, 800))
	w.do("fold the list", chromedp.Click(chromedp.CSS(tid("sessions-toggle"))))
	// Folded, the list's header and the top bar still say a session needs
	// the user.
	waitJS[bool](w, "the needs-you badges at 400 px", `document.querySelector(".sidebar").classList.contains("collapsed") && document.querySelector(`+jsq(tid("needs-list"))+`).textContent === "1" && !document.querySelector(`+jsq(tid("needs-list"))+`).hidden && !document.querySelector(`+jsq(tid("needs-top"))+`).hidden`, stateTimeout)
	shoot("400x800", 400, 800)
	w.noExceptions()
}

// evalShot captures the page's viewport as a PNG.
func evalShot(w *workbench) []byte {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, actionTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		w.fatal("capture: %v", err)
	}
	return buf
}
