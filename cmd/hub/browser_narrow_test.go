package main

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// jsReachable is an expression: for each data-testid selector given, why
// its element is not reachable ("" when it is shown inside the viewport
// and is the element at its own centre), as a JSON object.
func jsReachable(sels ...string) string {
	b, _ := json.Marshal(sels)
	return `JSON.stringify(Object.fromEntries(` + string(b) + `.map((sel) => {
	  const el = document.querySelector(sel);
	  if (!el) return [sel, "missing"];
	  el.scrollIntoView({ block: "nearest", inline: "nearest" });
	  const r = el.getBoundingClientRect();
	  if (r.width === 0 || r.height === 0) return [sel, "not shown"];
	  if (r.left < 0 || r.top < 0 || r.right > innerWidth + 0.5 || r.bottom > innerHeight + 0.5) return [sel, "outside the viewport: " + JSON.stringify(r)];
	  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
	  if (!hit || !(hit === el || el.contains(hit) || hit.contains(el) && hit.tagName === "LABEL")) return [sel, "covered by " + (hit ? hit.tagName + "." + hit.className : "nothing")];
	  return [sel, ""];
	}).filter(([, why]) => why)))`
}

const jsNoHorizontalScroll = `document.documentElement.scrollWidth <= innerWidth && document.body.scrollWidth <= innerWidth`

// At 400 × 800 the workbench has no horizontal scroll, the composer and
// the goal and queue controls are reachable, and the session list folds
// away.
func TestBrowser_NarrowScreen(t *testing.T) {
	w := openWorkbench(t)
	w.do("a 400 × 800 screen", chromedp.EmulateViewport(400, 800))
	waitJS[bool](w, "the narrow layout", `innerWidth === 400`, stateTimeout)
	sid, rid := w.startRun("a fairly long first message so that titles have to be cut somewhere on a narrow screen", simOpts{tokens: 100000, tokenMS: 30})
	waitJS[bool](w, "tokens streaming", jsRunText(rid)+`.includes("w5 ")`, stateTimeout)
	if !evalJS[bool](w, "no horizontal scroll", jsNoHorizontalScroll) {
		w.fatal("horizontal scroll at 400 px: scrollWidth %d", evalJS[int](w, "scrollWidth", `document.documentElement.scrollWidth`))
	}

	// The list folds away and comes back.
	toggle := tid("sessions-toggle")
	listShown := `document.querySelector(` + jsq(tid("session-list")) + `).getBoundingClientRect().height > 0`
	if !evalJS[bool](w, "list shown", `document.querySelector(`+jsq(toggle)+`).getBoundingClientRect().width > 0`) {
		w.fatal("no session list toggle at 400 px")
	}
	if evalJS[bool](w, "list shown", listShown) {
		// Picking a session folded it (or it starts open): fold it by hand.
		w.do("fold the list", chromedp.Click(chromedp.CSS(toggle)))
	}
	waitJS[bool](w, "the list folded", `!(`+listShown+`) && document.querySelector(`+jsq(toggle)+`).getAttribute("aria-expanded") === "false"`, stateTimeout)
	w.do("unfold the list", chromedp.Click(chromedp.CSS(toggle)))
	waitJS[bool](w, "the list shown", listShown+` && !!document.querySelector(`+jsq(itemSel(sid))+`)`, stateTimeout)
	w.do("fold the list again", chromedp.Click(chromedp.CSS(toggle)))
	waitJS[bool](w, "the list folded again", `!(`+listShown+`)`, stateTimeout)

	controls := []string{tid("start-message"), tid("start-submit"), tid("goal-input"),
		tid("goal-action") + `[data-action="set"]`, tid("goal-action") + `[data-action="pause"]`,
		tid("goal-action") + `[data-action="resume"]`, tid("goal-action") + `[data-action="clear"]`,
		tid("queue-input"), tid("queue-submit"), tid("stop-button"), tid("rename-session")}
	if got := evalJS[string](w, "reachable controls", jsReachable(controls...)); got != "{}" {
		w.fatal("controls not reachable at 400 × 800: %s", got)
	}
	if !evalJS[bool](w, "no horizontal scroll", jsNoHorizontalScroll) {
		w.fatal("horizontal scroll at 400 px with the list folded")
	}

	// They work: set a goal, then stop the run, from the narrow layout.
	w.do("set a goal",
		chromedp.SetValue(chromedp.CSS(tid("goal-input")), "keep it short"),
		chromedp.Click(chromedp.CSS(tid("goal-action")+`[data-action="set"]`)))
	waitJS[bool](w, "the goal set", `document.querySelector(`+jsq(tid("goal-state"))+`).dataset.state === "active"`, stateTimeout)
	w.do("stop", chromedp.Click(chromedp.CSS(tid("stop-button"))))
	waitJS[bool](w, "the run stopped", jsBanner(rid)+` === "cancelled"`, stateTimeout)
	if got := evalJS[string](w, "overlaps", jsToastOverlaps); got != "[]" {
		w.fatal("a toast covers controls at 400 px: %s", got)
	}
	if !evalJS[bool](w, "no horizontal scroll", jsNoHorizontalScroll) {
		w.fatal("horizontal scroll at 400 px at the end")
	}
	w.noExceptions()
}
