package main

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/protocol"
)

// While the hub is gone the pane says so, the controls that send are
// disabled with the reason, no caret streams; an action attempted anyway
// is refused with a message and never happens once the hub is back.
func TestBrowser_OfflineIsObvious(t *testing.T) {
	w := openWorkbench(t)
	sid, rid := w.startRun("offline test", simOpts{tokens: 100000, tokenMS: 30})
	waitJS[bool](w, "tokens streaming with a caret and Stop enabled",
		jsRunText(rid)+`.includes("w5 ") && !!document.querySelector('.assistant-text.streaming') && !document.querySelector(`+jsq(tid("stop-button"))+`).disabled`, stateTimeout)
	if !evalJS[bool](w, "banner hidden online", `document.querySelector(`+jsq(tid("offline-banner"))+`).hidden`) {
		w.fatal("the offline banner shows while connected")
	}

	t.Logf("killing the hub")
	w.hub.kill()
	waitJS[bool](w, "the offline banner", `!document.querySelector(`+jsq(tid("offline-banner"))+`).hidden`, stateTimeout)
	type control struct {
		Hidden, Disabled bool
		Title            string
	}
	for _, id := range []string{"stop-button", "start-submit", "queue-submit"} {
		c := evalJS[control](w, id, `(() => { const b = document.querySelector(`+jsq(tid(id))+`); return { Hidden: b.hidden, Disabled: b.disabled, Title: b.title }; })()`)
		if c.Hidden || !c.Disabled || c.Title == "" {
			w.fatal("%s while offline: %+v, want shown, disabled, with a reason", id, c)
		}
	}
	if n := evalJS[int](w, "carets", `document.querySelectorAll('.streaming').length`); n != 0 {
		w.fatal("%d streaming carets while offline", n)
	}
	if text := evalJS[string](w, "banner text", `document.querySelector(`+jsq(tid("offline-text"))+`).textContent`); text == "" {
		w.fatal("the offline banner says nothing")
	}

	// Attempted anyway: the client refuses at once, the form says so and
	// keeps the message.
	evalJS[bool](w, "cancel offline", `(window.runhub.cancel({ run_id: `+jsq(rid)+` }).then(() => (window.__cancel = "sent"), (e) => (window.__cancel = e.code)), true)`)
	waitJS[bool](w, "the cancel refused", `window.__cancel === "client_disconnected"`, stateTimeout)
	w.do("start offline", chromedp.SetValue(chromedp.CSS(tid("start-message")), "must not start later"))
	evalJS[bool](w, "submit with the keyboard", `(document.getElementById("start-form").requestSubmit(), true)`)
	waitJS[bool](w, "the refusal message", `[...document.querySelectorAll('[data-testid="toast"]')].some((e) => e.textContent.includes("not sent") && e.textContent.includes("offline"))`, stateTimeout)
	if got := evalJS[string](w, "message kept", `document.querySelector(`+jsq(tid("start-message"))+`).value`); got != "must not start later" {
		w.fatal("the refused message was not kept: %q", got)
	}

	// The hub comes back: nothing refused happens, the pane is live again.
	w.hub = startHubAt(t, w.hub.addr, w.hub.data)
	w.waitConnected()
	waitJS[bool](w, "the banner gone and Start enabled", `document.querySelector(`+jsq(tid("offline-banner"))+`).hidden && !document.querySelector(`+jsq(tid("start-submit"))+`).disabled`, stateTimeout)
	waitJS[bool](w, "the run interrupted by the restart", jsBanner(rid)+` === "interrupted"`, stateTimeout)
	time.Sleep(2 * time.Second) // time for a replayed control to land
	var list protocol.SessionList
	if code := call(t, "GET", w.hub.URL()+"/v1/sessions", nil, &list); code != 200 || len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid || list.Sessions[0].RunID != rid {
		w.fatal("after the reconnect the hub has %+v; want only session %s with run %s (no refused start replayed)", list.Sessions, sid, rid)
	}
	if st := list.Sessions[0]; st.Status != protocol.StatusInterrupted {
		w.fatal("the run ended %s; want interrupted (no refused cancel replayed)", st.Status)
	}
	w.noExceptions()
}
