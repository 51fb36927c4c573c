package main

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/client"
)

// At 400 × 800 (issue 24): a page opened on a session folds the list (the
// transcript gets the room), "↓ Latest" covers no control of the dock, and
// a row viewed by two tabs shows its presence as an eye and "2" without
// cutting its status badge.
func TestBrowser_NarrowDetails(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	w.do("a 400 × 800 screen", chromedp.EmulateViewport(400, 800))
	waitJS[bool](w, "the narrow layout", `innerWidth === 400`, stateTimeout)
	sid := httpSession(t, base, "narrow details")
	rid := httpRun(t, base, sid, "long", map[string]any{"tokens": 100000, "token_ms": 10, "tools": 0})

	// Opened on the session, with the list remembered as open.
	evalJS[bool](w, "remember the list open", `(localStorage.setItem("runhub.listCollapsed", "0"), true)`)
	w.do("open the session", chromedp.Navigate(base+"/#/s/"+sid), chromedp.Reload())
	w.waitConnected()
	waitJS[bool](w, "the run streaming", jsRunText(rid)+`.includes("w30 ")`, stateTimeout)
	type layout struct {
		Folded           bool
		List, Transcript float64
	}
	l := evalJS[layout](w, "layout", `({ Folded: document.querySelector(".sidebar").classList.contains("collapsed"),
		List: document.querySelector(`+jsq(tid("session-list"))+`).getBoundingClientRect().height,
		Transcript: document.getElementById("transcript-scroll").getBoundingClientRect().height })`)
	if !l.Folded || l.List != 0 || l.Transcript < 300 {
		w.fatal("opened on a session at 400 × 800: %+v; want the list folded and the transcript given the room", l)
	}

	// "↓ Latest": scrolled up while tokens stream, it shows and covers no
	// control of the dock.
	waitJS[bool](w, "enough text to scroll", `(() => { const s = document.getElementById("transcript-scroll"); return s.scrollHeight > s.clientHeight + 400; })()`, stateTimeout)
	evalJS[bool](w, "scroll up", `(document.getElementById("transcript-scroll").scrollTop = 0, true)`)
	waitJS[bool](w, "the jump button", `!document.querySelector(`+jsq(tid("jump-latest"))+`).hidden`, stateTimeout)
	overlap := evalJS[string](w, "overlaps", `(() => {
		const j = document.querySelector(`+jsq(tid("jump-latest"))+`).getBoundingClientRect();
		const hit = [];
		for (const el of document.querySelectorAll('.dock button, .dock input, .dock select, .dock textarea, .dock [data-testid="queue-toggle"]')) {
			const r = el.getBoundingClientRect();
			if (r.width && r.height && r.left < j.right && j.left < r.right && r.top < j.bottom && j.top < r.bottom) hit.push(el.dataset.testid || el.tagName);
		}
		return hit.join(",");
	})()`)
	if overlap != "" {
		w.fatal("↓ Latest covers %s", overlap)
	}
	if got := evalJS[string](w, "jump reachable", jsReachable(tid("jump-latest"), tid("queue-submit"), tid("queue-toggle"))); got != "{}" {
		w.fatal("not reachable: %s", got)
	}
	w.do("jump", chromedp.Click(chromedp.CSS(tid("jump-latest"))))
	waitJS[bool](w, "at the end", `(() => { const s = document.getElementById("transcript-scroll"); return s.scrollHeight - s.scrollTop - s.clientHeight < 60; })()`, stateTimeout)

	// Presence, compact, with the status readable.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other, err := client.Dial(ctx, "ws://"+w.hub.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Watch(ctx, false, sid)
	w.do("unfold the list", chromedp.Click(chromedp.CSS(tid("sessions-toggle"))))
	sel := jsq(itemSel(sid) + " " + tid("session-presence"))
	waitJS[bool](w, `the row to show the eye and 2`, `document.querySelector(`+sel+`)?.textContent === "2"`, stateTimeout)
	type badge struct {
		Text          string
		Scroll, Width float64
	}
	b := evalJS[badge](w, "status badge", `(() => { const e = document.querySelector(`+jsq(itemSel(sid)+" "+tid("status-badge"))+`); return { Text: e.textContent, Scroll: e.scrollWidth, Width: e.clientWidth }; })()`)
	if b.Text != "running" || b.Scroll > b.Width {
		w.fatal("the status badge reads %q and is cut (%v of %v px)", b.Text, b.Width, b.Scroll)
	}
	if !evalJS[bool](w, "no horizontal scroll", jsNoHorizontalScroll) {
		w.fatal("horizontal scroll at 400 px")
	}
	w.noExceptions()
}
