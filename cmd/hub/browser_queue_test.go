package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/protocol"
)

const jsQueueTexts = `[...document.querySelectorAll('[data-testid="queue-item-text"]')].map((e) => e.textContent).join(",")`

func queueItemSel(n int, control string) string {
	return tid("queue-items") + ` > li:nth-child(` + string(rune('0'+n)) + `) ` + tid(control)
}

// The queue panel shows the queued messages of the focused session; they
// are edited, moved and removed from it (the hub's queue and journal
// follow), and "Stop & clear queue" stops the run with nothing starting
// after it (issue 24: Stop started the next queued message at once).
func TestBrowser_QueuePanel(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	sid, rid := w.startRun("queue panel", simOpts{tokens: 100000, tokenMS: 20})
	waitJS[bool](w, "the run streaming", jsRunText(rid)+`.includes("w3 ")`, stateTimeout)
	for _, m := range []string{"one", "two", "three"} {
		w.do("queue "+m,
			chromedp.SetValue(chromedp.CSS(tid("queue-input")), m),
			chromedp.SetValue(chromedp.CSS(tid("queue-mode")), "queue"),
			chromedp.Click(chromedp.CSS(tid("queue-submit"))))
		waitJS[bool](w, "the input cleared", `document.querySelector(`+jsq(tid("queue-input"))+`).value === ""`, stateTimeout)
	}
	waitJS[bool](w, "three queued", `document.querySelector(`+jsq(tid("queue-depth"))+`).textContent === "3"`, stateTimeout)
	w.do("open the queue", chromedp.Click(chromedp.CSS(tid("queue-toggle"))))
	waitJS[bool](w, "the queued messages listed", jsQueueTexts+` === "one,two,three"`, stateTimeout)

	w.do("edit the second", chromedp.Click(chromedp.CSS(queueItemSel(2, "queue-edit"))))
	w.do("type", chromedp.SetValue(chromedp.CSS(tid("queue-edit-input")), "two, edited"), chromedp.Click(chromedp.CSS(tid("queue-edit-save"))))
	waitJS[bool](w, "the edit shown", jsQueueTexts+` === "one,two, edited,three"`, stateTimeout)
	w.do("move the third up", chromedp.Click(chromedp.CSS(queueItemSel(3, "queue-up"))))
	waitJS[bool](w, "the move shown", jsQueueTexts+` === "one,three,two, edited"`, stateTimeout)
	w.do("remove the first", chromedp.Click(chromedp.CSS(queueItemSel(1, "queue-remove"))))
	waitJS[bool](w, "the removal shown", jsQueueTexts+` === "three,two, edited"`, stateTimeout)
	waitJS[bool](w, "the count follows", `document.querySelector(`+jsq(tid("queue-depth"))+`).textContent === "2"`, stateTimeout)

	var st protocol.QueueState
	if code := call(t, "GET", base+"/v1/sessions/"+sid+"/queue", nil, &st); code != 200 || st.Depth != 2 || st.Items[0].Message != "three" || st.Items[1].Message != "two, edited" {
		w.fatal("the hub's queue: %d %+v", code, st)
	}
	var last *protocol.QueueUpdatedPayload
	for _, e := range allEvents(t, base, rid) {
		if e.Type == protocol.EventQueueUpdated {
			p, _ := protocol.DecodePayload[protocol.QueueUpdatedPayload](&e)
			last = &p
		}
	}
	if last == nil || last.Depth != 2 || last.Items[0].Preview != "three" || last.Items[1].Preview != "two, edited" {
		w.fatal("the journal's last queue.updated is %+v", last)
	}

	// Stop & clear queue.
	waitJS[bool](w, "Stop & clear shown", `!document.querySelector(`+jsq(tid("stop-clear"))+`).hidden`, stateTimeout)
	w.do("stop & clear", chromedp.Click(chromedp.CSS(tid("stop-clear"))))
	waitJS[bool](w, "the run cancelled", jsBanner(rid)+` === "cancelled"`, stateTimeout)
	waitJS[bool](w, "the queue empty", jsQueueTexts+` === "" && document.querySelector(`+jsq(tid("queue-depth"))+`).textContent === "0"`, stateTimeout)
	time.Sleep(time.Second) // a drained message would have started by now
	var runs struct {
		Runs []protocol.RunSummary `json:"runs"`
	}
	if code := call(t, "GET", base+"/v1/sessions/"+sid+"/runs", nil, &runs); code != 200 || len(runs.Runs) != 1 {
		w.fatal("after Stop & clear the session has %d runs, want 1 (nothing started)", len(runs.Runs))
	}
	if n := evalJS[int](w, "runs shown", `document.querySelectorAll(`+jsq(tid("transcript")+" "+tid("run"))+`).length`); n != 1 {
		w.fatal("the transcript shows %d runs", n)
	}
	if strings.Contains(evalJS[string](w, "toasts", `document.querySelector(`+jsq(tid("toasts"))+`).textContent`), "error") {
		w.fatal("a toast reported an error")
	}
	w.noExceptions()
}
