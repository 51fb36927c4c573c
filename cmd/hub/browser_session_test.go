package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/protocol"
)

// jsItemTitle is an expression: the title the session list shows for sid.
func jsItemTitle(sid string) string {
	return `(document.querySelector(` + jsq(itemSel(sid)+" "+tid("session-title")) + `)?.textContent || "")`
}

const jsPaneTitle = `document.querySelector('[data-testid="pane-title"]').textContent`

// secondTab opens another tab of the same browser on the workbench and
// returns an evaluator that waits for an expression to be truthy in it.
func (w *workbench) secondTab() func(what, expr string) {
	w.t.Helper()
	ctx, cancel := chromedp.NewContext(w.ctx)
	w.t.Cleanup(cancel)
	// The first Do makes the tab and binds its life to its context: ctx
	// itself, which the cleanup cancels.
	if err := chromedp.Do(ctx); err != nil {
		w.fatal("open a second tab: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		w.t.Helper()
		actx, acancel := context.WithTimeout(ctx, stateTimeout+10*time.Second)
		defer acancel()
		if err := chromedp.Do(actx, actions...); err != nil {
			w.fatal("second tab: %s: %v", what, err)
		}
	}
	run("load the workbench", chromedp.Navigate(w.hub.URL()+"/"))
	return func(what, expr string) {
		w.t.Helper()
		deadline := time.Now().Add(stateTimeout)
		for {
			actx, acancel := context.WithTimeout(ctx, actionTimeout)
			ok, err := chromedp.Run(actx, chromedp.Evaluate[bool](`!!(`+expr+`)`))
			acancel()
			if err != nil {
				w.fatal("second tab: %s: %v", what, err)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				w.fatal("second tab: timed out after %v waiting for %s", stateTimeout, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// A steer stays in the transcript as the user's entry (also after a
// reload); a session keeps the title it was given while runs come and go;
// the rename control renames it for good; delete refuses a session with an
// active run and removes an idle one from every tab.
func TestBrowser_SteerTitleRenameDelete(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()

	// Steer.
	_, rid := w.startRun("steer me", simOpts{tokens: 2000, tokenMS: 20})
	waitJS[bool](w, "the first tokens", jsRunText(rid)+`.includes("w5 ")`, stateTimeout)
	w.do("steer",
		chromedp.SetValue(chromedp.CSS(tid("queue-input")), "go left at the fork"),
		chromedp.SetValue(chromedp.CSS(tid("queue-mode")), "steer"),
		chromedp.Click(chromedp.CSS(tid("queue-submit"))))
	steerSel := runSel(rid) + " " + tid("user-message") + `[data-kind="steer"]`
	waitJS[bool](w, "the steer as a user entry", `(document.querySelector(`+jsq(steerSel)+`)?.textContent || "").includes("go left at the fork")`, stateTimeout)
	w.do("stop the run", chromedp.Click(chromedp.CSS(tid("stop-button"))))
	waitJS[bool](w, "the run cancelled", jsBanner(rid)+` === "cancelled"`, stateTimeout)
	w.do("reload", chromedp.Reload())
	w.waitConnected()
	waitJS[bool](w, "the steer entry after the reload", `(document.querySelector(`+jsq(steerSel)+`)?.textContent || "").includes("go left at the fork")`, stateTimeout)

	// A given title survives a run that names itself.
	sid := httpSession(t, base, "Given title")
	r1 := httpRun(t, base, sid, "first", map[string]any{"tokens": 3, "token_ms": 0, "tools": 0, "title": "A run's own title"})
	waitRunEnd(t, base, r1)
	w.focusByHash(sid)
	waitJS[bool](w, "the session completed in the list", jsBadge(sid)+` === "completed"`, stateTimeout)
	// The pane follows the hash on its next frame: wait for it, then check
	// that neither the list nor the pane took the run's own title.
	waitJS[bool](w, "the pane showing the session", jsPaneTitle+` === "Given title" || `+jsPaneTitle+` === "A run's own title"`, stateTimeout)
	if got, pane := evalJS[string](w, "item title", jsItemTitle(sid)), evalJS[string](w, "pane title", jsPaneTitle); got != "Given title" || pane != "Given title" {
		w.fatal("after a titled run the list shows %q and the pane %q, want the given title", got, pane)
	}

	// Another tab watches the same sessions.
	other := w.secondTab()
	other("the session in the second tab", `!!document.querySelector(`+jsq(itemSel(sid))+`)`)

	// Rename.
	w.do("open the rename form", chromedp.Click(chromedp.CSS(tid("rename-session"))))
	w.do("rename",
		chromedp.SetValue(chromedp.CSS(tid("rename-input")), "Renamed by the user"),
		chromedp.Click(chromedp.CSS(tid("rename-save"))))
	waitJS[bool](w, "the new title in the pane and the list",
		jsPaneTitle+` === "Renamed by the user" && `+jsItemTitle(sid)+` === "Renamed by the user"`, stateTimeout)
	other("the new title in the second tab", jsItemTitle(sid)+` === "Renamed by the user"`)
	r2 := httpRun(t, base, sid, "second", map[string]any{"tokens": 3, "token_ms": 0, "tools": 0, "title": "Yet another title"})
	waitRunEnd(t, base, r2)
	waitJS[bool](w, "the second run in the transcript", jsBanner(r2)+` === "completed"`, stateTimeout)
	time.Sleep(300 * time.Millisecond) // a few status intervals
	if got := evalJS[string](w, "item title", jsItemTitle(sid)); got != "Renamed by the user" {
		w.fatal("a run renamed the session to %q", got)
	}
	w.do("reload", chromedp.Reload())
	w.waitConnected()
	waitJS[bool](w, "the new title after the reload", jsPaneTitle+` === "Renamed by the user"`, stateTimeout)

	// Delete: refused while a run is active, then done.
	r3 := httpRun(t, base, sid, "long", map[string]any{"tokens": 100000, "token_ms": 20, "tools": 0})
	waitJS[bool](w, "the long run streaming", jsBadge(sid)+` === "running"`, stateTimeout)
	w.do("delete while running", chromedp.Click(chromedp.CSS(tid("delete-session"))), chromedp.Click(chromedp.CSS(tid("delete-yes"))))
	waitJS[bool](w, "the refusal", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes("stop it first"))`, stateTimeout)
	if !evalJS[bool](w, "item kept", `!!document.querySelector(`+jsq(itemSel(sid))+`)`) {
		w.fatal("a refused delete removed the session from the list")
	}
	if code := call(t, "POST", base+"/v1/runs/"+r3+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	waitJS[bool](w, "the long run cancelled", jsBadge(sid)+` === "cancelled"`, stateTimeout)
	w.do("delete", chromedp.Click(chromedp.CSS(tid("delete-session"))), chromedp.Click(chromedp.CSS(tid("delete-yes"))))
	waitJS[bool](w, "the session gone from the list and the pane",
		`!document.querySelector(`+jsq(itemSel(sid))+`) && `+jsFocused+` === "" && !document.querySelector('[data-testid="transcript"] [data-testid="run"]')`, stateTimeout)
	other("the session gone from the second tab", `!document.querySelector(`+jsq(itemSel(sid))+`)`)
	var e protocol.ErrorBody
	if code := call(t, "GET", base+"/v1/sessions/"+sid, nil, &e); code != 404 {
		t.Fatalf("the deleted session answers %d", code)
	}
	if strings.Contains(evalJS[string](w, "list", `document.querySelector('[data-testid="session-list"]').textContent`), "Renamed by the user") {
		w.fatal("the deleted session's title is still listed")
	}
	w.noExceptions()
}
