package main

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/internal/redistest"
)

// The workbench of a hub on Redis (runtime=runners) with no runner: a run
// started from the start form shows "waiting for a runner" on its row and
// in the pane's header, not a silent "queued".
func TestBrowser_WaitingForARunner(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	w := openWorkbench(t, "RUNHUB_REDIS_URL="+rs.URL())
	w.do("fill the start form", chromedp.SetValue(chromedp.CSS(tid("start-message")), "anyone there?"))
	w.setChecked("start-new-session", true)
	w.do("click start-submit", chromedp.Click(chromedp.CSS(tid("start-submit"))))
	sid := waitJS[string](w, "the page to focus the new session", jsFocused, stateTimeout)
	w.checkID("session", sid)
	waitJS[bool](w, "the row to say waiting for a runner",
		`document.querySelector(`+jsq(itemSel(sid)+" "+tid("session-progress"))+`)?.textContent === "waiting for a runner"`, stateTimeout)
	waitJS[bool](w, "the pane to say waiting for a runner",
		`document.querySelector(`+jsq(tid("pane-progress"))+`)?.textContent === "waiting for a runner"`, stateTimeout)
	w.noExceptions()
}
