package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// jsToastOverlaps is an expression: a description of every overlap of a
// shown toast with a shown control (button, input, select, textarea, list
// row), as a JSON array; "[]" when there is none.
const jsToastOverlaps = `JSON.stringify((() => {
  const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden"; };
  const toasts = [...document.querySelectorAll('[data-testid="toast"]')].filter(shown);
  const controls = [...document.querySelectorAll('button, input, select, textarea, [data-testid="session-item"]')].filter(shown);
  const out = [];
  for (const t of toasts) {
    const a = t.getBoundingClientRect();
    for (const c of controls) {
      const b = c.getBoundingClientRect();
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
        out.push((c.dataset.testid || c.id || c.tagName) + " under " + JSON.stringify(t.textContent.slice(0, 40)));
    }
  }
  return out;
})())`

// toasts is the number of toasts shown.
const jsToastCount = `document.querySelectorAll('[data-testid="toast"]').length`

// Notices never cover a control, and one action yields at most one.
func TestBrowser_ToastsCoverNothing(t *testing.T) {
	w := openWorkbench(t)
	_, rid := w.startRun("keep me busy", simOpts{tokens: 100000, tokenMS: 30})
	waitJS[bool](w, "the run streaming with Stop shown", jsRunText(rid)+`.includes("w3 ") && !document.querySelector(`+jsq(tid("stop-button"))+`).hidden`, stateTimeout)
	if n := evalJS[int](w, "toasts", jsToastCount); n != 0 {
		w.fatal("%d toasts before any action", n)
	}

	// Start in the busy session: refused, one notice.
	w.setChecked("start-new-session", false)
	w.do("start in the busy session",
		chromedp.SetValue(chromedp.CSS(tid("start-message")), "one more"),
		chromedp.Click(chromedp.CSS(tid("start-submit"))))
	waitJS[bool](w, "the refusal notice", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes("queue the message instead"))`, stateTimeout)
	time.Sleep(time.Second) // anything else the click causes
	if n := evalJS[int](w, "toasts", jsToastCount); n != 1 {
		w.fatal("one click gave %d toasts, want 1", n)
	}
	if got := evalJS[string](w, "overlaps", jsToastOverlaps); got != "[]" {
		w.fatal("a toast covers controls: %s", got)
	}
	if !evalJS[bool](w, "Stop clickable", `(() => { const b = document.querySelector(`+jsq(tid("stop-button"))+`).getBoundingClientRect();
		return document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2)?.closest('[data-testid="stop-button"]') !== null; })()`) {
		w.fatal("the Stop button is covered")
	}

	// More notices in a row: a goal pause without a goal, then a queued
	// message; still one notice, still covering nothing.
	w.do("pause a goal that is not there", chromedp.Click(chromedp.CSS(tid("goal-action")+`[data-action="pause"]`)))
	waitJS[bool](w, "the goal notice", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes("goal pause"))`, stateTimeout)
	w.do("queue a message",
		chromedp.SetValue(chromedp.CSS(tid("queue-input")), "after this one"),
		chromedp.SetValue(chromedp.CSS(tid("queue-mode")), "queue"),
		chromedp.Click(chromedp.CSS(tid("queue-submit"))))
	waitJS[bool](w, "the queued notice", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes("Queued"))`, stateTimeout)
	if n := evalJS[int](w, "toasts", jsToastCount); n != 1 {
		w.fatal("%d toasts after three actions, want the newest only", n)
	}
	if got := evalJS[string](w, "overlaps", jsToastOverlaps); got != "[]" {
		w.fatal("a toast covers controls: %s", got)
	}
	w.noExceptions()
}
