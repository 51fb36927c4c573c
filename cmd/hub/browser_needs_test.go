package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// grantNotifications grants the page's origin the notification permission.
func (w *workbench) grantNotifications() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, actionTimeout)
	defer cancel()
	err := chromedp.FromContext(w.ctx).Browser.Call(ctx, browser.CommandSetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted, Origin: w.hub.URL()}, nil)
	if err != nil {
		w.fatal("grant notifications: %v", err)
	}
}

// spyNotifications records every desktop notification the page makes (and
// still makes it), and makes the page look hidden or visible.
const jsSpyNotifications = `(() => {
	const O = window.Notification;
	window.__notes = [];
	class Spy extends O {
		constructor(title, opts) { super(title, opts); window.__notes.push({ Title: title, Body: (opts && opts.body) || "" }); }
	}
	Object.defineProperty(Spy, "permission", { get: () => O.permission });
	Spy.requestPermission = (...a) => O.requestPermission(...a);
	window.Notification = Spy;
	window.__setHidden = (on) => {
		Object.defineProperty(document, "hidden", { configurable: true, get: () => on });
		Object.defineProperty(document, "visibilityState", { configurable: true, get: () => (on ? "hidden" : "visible") });
	};
	return true;
})()`

type note struct{ Title, Body string }

// At 400 × 800 with the list folded, a session that waits for an approval
// shows as a count on the list's header and in the top bar; with
// notifications turned on (permission granted) a hidden tab gets a desktop
// notification when the session starts needing the user and when its run
// ends, and a visible one gets none.
func TestBrowser_NeedsYouBadgeAndNotifications(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	w.grantNotifications()
	w.do("a 400 × 800 screen", chromedp.EmulateViewport(400, 800))
	waitJS[bool](w, "the narrow layout", `innerWidth === 400`, stateTimeout)
	evalJS[bool](w, "spy on notifications", jsSpyNotifications)
	w.do("turn notifications on", chromedp.Click(chromedp.CSS(tid("notify-toggle"))))
	waitJS[bool](w, "notifications on", `document.querySelector(`+jsq(tid("notify-toggle"))+`).dataset.on === "true"`, stateTimeout)

	// Fold the list.
	if !evalJS[bool](w, "list folded?", `document.querySelector(".sidebar").classList.contains("collapsed")`) {
		w.do("fold the list", chromedp.Click(chromedp.CSS(tid("sessions-toggle"))))
	}
	evalJS[bool](w, "hide the tab", `(window.__setHidden(true), true)`)

	sid := httpSession(t, base, "needs approval")
	rid := httpRun(t, base, sid, "approve me", map[string]any{"tokens": 5, "token_ms": 0, "tools": 1, "approval": true})
	shown := func(id string) string {
		return `(() => { const e = document.querySelector(` + jsq(tid(id)) + `); if (!e || e.hidden) return ""; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && r.bottom <= innerHeight && r.right <= innerWidth ? e.textContent : ""; })()`
	}
	waitJS[bool](w, "the badges to count one session", shown("needs-top-count")+` === "1" && `+shown("needs-list")+` === "1"`, stateTimeout)
	if !evalJS[bool](w, "list still folded", `document.querySelector(".sidebar").classList.contains("collapsed")`) {
		w.fatal("the list unfolded")
	}
	notes := waitJS[[]note](w, "a notification for the approval", `window.__notes.length >= 1 && window.__notes`, stateTimeout)
	if len(notes) != 1 || notes[0].Title != "needs approval" || !strings.Contains(notes[0].Body, "approval") {
		w.fatal("notifications %+v, want one for the approval of %q", notes, "needs approval")
	}

	// The top bar badge takes the user to the session.
	w.do("click the top bar badge", chromedp.Click(chromedp.CSS(tid("needs-top"))))
	waitJS[bool](w, "the session focused", jsFocused+` === `+jsq(sid), stateTimeout)

	// Answered: the run ends; a notification says so; the badges go.
	aid := "a_" + rid[len(rid)-8:]
	if code := call(t, "POST", base+"/v1/runs/"+rid+"/approvals/"+aid, map[string]string{"choice": "once"}, nil); code != 200 {
		w.fatal("approve: %d", code)
	}
	waitRunEnd(t, base, rid)
	notes = waitJS[[]note](w, "a notification for the end", `window.__notes.length >= 2 && window.__notes`, stateTimeout)
	if len(notes) != 2 || !strings.Contains(notes[1].Body, "ompleted") {
		w.fatal("notifications %+v, want the second to say the run completed", notes)
	}
	waitJS[bool](w, "the badges gone", shown("needs-top")+` === "" && `+shown("needs-list")+` === ""`, stateTimeout)

	// A visible tab gets no notification.
	evalJS[bool](w, "show the tab", `(window.__setHidden(false), true)`)
	r2 := httpRun(t, base, sid, "visible", map[string]any{"tokens": 3, "token_ms": 0, "tools": 0})
	waitRunEnd(t, base, r2)
	waitJS[bool](w, "the second run shown completed", jsBanner(r2)+` === "completed"`, stateTimeout)
	time.Sleep(300 * time.Millisecond)
	if n := evalJS[int](w, "notifications", `window.__notes.length`); n != 2 {
		w.fatal("%d notifications; a visible tab must get none", n)
	}
	w.noExceptions()
}

// moveMouse moves the pointer to a point of the page.
func (w *workbench) moveMouse(x, y float64) {
	w.t.Helper()
	w.do("move the pointer", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y))
}

// With the pointer over the list, nothing moves: a session created
// elsewhere waits behind an "N new" pill, a run starting changes no row's
// height, and an answered prompt keeps its row in "Needs you" until the
// pointer leaves; then the list takes its order. Every row's rectangle is
// sampled at every animation frame meanwhile.
func TestBrowser_RowsNeverMoveUnderThePointer(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	var sids []string
	for _, title := range []string{"oldest", "middle", "newest"} {
		sid := httpSession(t, base, title)
		waitRunEnd(t, base, httpRun(t, base, sid, title, map[string]any{"tokens": 3, "token_ms": 0, "tools": 0}))
		sids = append(sids, sid)
	}
	needs := httpSession(t, base, "waits for approval")
	prompt := httpRun(t, base, needs, "approve", map[string]any{"tokens": 3, "token_ms": 0, "tools": 1, "approval": true})
	waitJS[bool](w, "four rows, one needing the user", `document.querySelectorAll(`+jsq(tid("session-item"))+`).length === 4 && `+jsBadge(needs)+` === "awaiting_approval" && document.querySelector(`+jsq(itemSel(needs))+`).dataset.placedGroup === "needs"`, stateTimeout)

	// The pointer over the middle of the list, then sample every frame.
	type rect struct{ X, Y, W, H float64 }
	r := evalJS[rect](w, "the list's rectangle", `(() => { const b = document.querySelector(`+jsq(tid("session-list"))+`).getBoundingClientRect(); return { X: b.x, Y: b.y, W: b.width, H: b.height }; })()`)
	w.moveMouse(r.X+r.W/2, r.Y+40)
	evalJS[bool](w, "sample the rows", `(() => {
		const rows = () => [...document.querySelectorAll('[data-testid="session-item"]')];
		const first = new Map(rows().map((e) => [e.dataset.sessionId, e.getBoundingClientRect()]));
		window.__moved = [];
		window.__sampling = true;
		const tick = () => {
			for (const e of rows()) {
				const a = first.get(e.dataset.sessionId), b = e.getBoundingClientRect();
				if (!a) { window.__moved.push("new row " + e.dataset.sessionId + " placed"); continue; }
				if (a.top !== b.top || a.height !== b.height || a.left !== b.left) window.__moved.push(e.dataset.sessionId + ": " + a.top + "/" + a.height + " → " + b.top + "/" + b.height);
			}
			if (window.__sampling) requestAnimationFrame(tick);
		};
		requestAnimationFrame(tick);
		return true;
	})()`)

	// A session created elsewhere, a run starting and streaming in another,
	// the prompt answered.
	fresh := httpSession(t, base, "created elsewhere")
	waitJS[bool](w, "the new pill", `(() => { const p = document.querySelector(`+jsq(tid("new-pill"))+`); return !p.hidden && p.textContent.includes("1 new"); })()`, stateTimeout)
	if evalJS[bool](w, "new row shown?", `!!document.querySelector(`+jsq(itemSel(fresh))+`)`) {
		w.fatal("the new session's row was put in the list under the pointer")
	}
	live := httpRun(t, base, sids[1], "stream", map[string]any{"tokens": 40, "token_ms": 20, "tools": 1})
	waitJS[bool](w, "the run streaming in its row", jsBadge(sids[1])+` === "running"`, stateTimeout)
	aid := "a_" + prompt[len(prompt)-8:]
	if code := call(t, "POST", base+"/v1/runs/"+prompt+"/approvals/"+aid, map[string]string{"choice": "once"}, nil); code != 200 {
		w.fatal("approve: %d", code)
	}
	waitRunEnd(t, base, prompt)
	waitRunEnd(t, base, live)
	waitJS[bool](w, "both runs completed in their rows", jsBadge(needs)+` === "completed" && `+jsBadge(sids[1])+` === "completed"`, stateTimeout)
	time.Sleep(300 * time.Millisecond)
	moved := evalJS[[]string](w, "rows moved", `(window.__sampling = false, window.__moved)`)
	if len(moved) > 0 {
		w.fatal("rows moved under the pointer:\n  %s", strings.Join(moved[:min(len(moved), 20)], "\n  "))
	}
	if g := evalJS[string](w, "answered row's place", `document.querySelector(`+jsq(itemSel(needs))+`).dataset.placedGroup`); g != "needs" {
		w.fatal("the answered session left Needs you under the pointer (placed in %q)", g)
	}

	// The pointer leaves: the list takes its order.
	w.moveMouse(r.X+r.W+300, r.Y+40)
	waitJS[bool](w, "the new row placed and the answered one moved", `!!document.querySelector(`+jsq(itemSel(fresh))+`) && document.querySelector(`+jsq(tid("new-pill"))+`).hidden && document.querySelector(`+jsq(itemSel(needs))+`).dataset.placedGroup === "rest"`, stateTimeout)
	order := evalJS[string](w, "order", `[...document.querySelectorAll(`+jsq(tid("session-item"))+`)].map((e) => e.dataset.sessionId).join(",")`)
	if !strings.HasPrefix(order, fresh+",") {
		w.fatal("after the pointer left the order is %s; want the new session %s first", order, fresh)
	}
	w.noExceptions()
}
