package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// jsListOrder is an expression: the session ids of the list, top to
// bottom, as JSON.
const jsListOrder = `JSON.stringify([...document.querySelectorAll('[data-testid="session-item"]')].map((e) => e.dataset.sessionId))`

func (w *workbench) listOrder() []string {
	w.t.Helper()
	var ids []string
	if err := json.Unmarshal([]byte(evalJS[string](w, "list order", jsListOrder)), &ids); err != nil {
		w.fatal("list order: %v", err)
	}
	return ids
}

// sampleStable samples the list order n times, every, and fails when a row
// moved.
func (w *workbench) sampleStable(what string, n int, every time.Duration) []string {
	w.t.Helper()
	first := w.listOrder()
	for i := range n {
		time.Sleep(every)
		if got := w.listOrder(); !slices.Equal(got, first) {
			w.fatal("%s: the list moved at sample %d of %d:\n was %v\n now %v", what, i+1, n, first, got)
		}
	}
	return first
}

// With many sessions streaming at different speeds the list holds still;
// a session waiting for an approval is pinned in "needs you" at the top
// and goes back to its place (newest created first) once answered.
func TestBrowser_SessionListDoesNotJump(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	var busy []string
	for i := range 10 {
		sid := httpSession(t, base, fmt.Sprintf("busy %d", i))
		httpRun(t, base, sid, "stream", map[string]any{"tokens": 100000, "token_ms": 25 + 9*i, "tools": 0})
		busy = append(busy, sid)
	}
	asks := httpSession(t, base, "asks first")
	rid := httpRun(t, base, asks, "needs approval", map[string]any{"tokens": 20, "token_ms": 10, "tools": 1, "approval": true})
	calm := httpSession(t, base, "calm")

	all := append(append([]string{}, busy...), asks, calm)
	for _, sid := range all {
		w.checkID("session", sid)
	}
	allJSON, _ := json.Marshal(all)
	waitJS[bool](w, "every session listed, the busy ones streaming and one awaiting approval",
		`(() => { const ids = `+string(allJSON)+`; if (!ids.every((id) => document.querySelector('[data-testid="session-item"][data-session-id="' + id + '"]'))) return false;
		  return `+jsBadge(asks)+` === "awaiting_approval" && ids.slice(0, 10).every((id) => (document.querySelector('[data-testid="session-item"][data-session-id="' + id + '"] [data-testid="token-count"]')?.textContent | 0) > 3); })()`, stateTimeout)

	w.sampleStable("ten sessions streaming", 20, 250*time.Millisecond)

	// Newest created first, the session waiting on the user above them all.
	want := []string{asks, calm}
	for i := len(busy) - 1; i >= 0; i-- {
		want = append(want, busy[i])
	}
	if got := w.listOrder(); !slices.Equal(got, want) {
		w.fatal("list order\n got %v\nwant %v", got, want)
	}
	if !evalJS[bool](w, "needs-you heading", `(() => { const h = document.querySelector('[data-testid="group-needs-you"]'); const a = document.querySelector(`+jsq(itemSel(asks))+`);
		return h && !h.hidden && (h.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING) && a.dataset.group === "needs"; })()`) {
		w.fatal("the approval session is not under a visible needs-you heading")
	}

	// Answered: the session leaves "needs you" for its place by creation.
	if code := call(t, "POST", base+"/v1/runs/"+rid+"/approvals/a_"+rid[len(rid)-8:], map[string]string{"choice": "once"}, nil); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	waitJS[bool](w, "the answered session back among the rest",
		`document.querySelector(`+jsq(itemSel(asks))+`).dataset.group === "rest" && document.querySelector('[data-testid="group-needs-you"]').hidden`, stateTimeout)
	want = append([]string{calm, asks}, want[2:]...)
	if got := w.listOrder(); !slices.Equal(got, want) {
		w.fatal("list order after the answer\n got %v\nwant %v", got, want)
	}
	w.sampleStable("after the answer", 12, 250*time.Millisecond)
	var st protocol.SessionStatus
	if call(t, "GET", base+"/v1/sessions/"+asks, nil, &st); st.PendingApproval != nil {
		t.Fatalf("the approval is still pending: %+v", st)
	}
	w.noExceptions()
}
