package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/internal/webuiclient"
)

// A session's runs are shown in the order they started, not by run id:
// runs imported from hermes-webui keep its random hex ids, here in the
// reverse of their order. Each shows its prompt (run.started).
func TestBrowser_RunsOrderedByStart(t *testing.T) {
	dir, data, sid := t.TempDir(), t.TempDir(), "0dd0dd0dd0dd"
	prompts := []string{"first, oldest", "second", "third, newest"}
	ids := []string{"ffffffffffffffffffffffffffffff01", "88888888888888888888888888888802", "11111111111111111111111111111103"}
	var msgs []map[string]any
	var runs []webuiclient.Run
	for i, p := range prompts {
		at := 1786000000.0 + float64(i*100)
		msgs = append(msgs, map[string]any{"role": "user", "content": p, "timestamp": at},
			map[string]any{"role": "assistant", "content": "answer " + p, "timestamp": at + 2})
		runs = append(runs, webuiclient.Run{ID: ids[i], Prompt: p, Rows: []webuiclient.Row{
			{Event: "token", Payload: map[string]any{"text": "answer " + p}, At: at + 1},
			{Event: "done", Payload: map[string]any{"session": map[string]any{"session_id": sid}, "usage": map[string]any{}}, At: at + 2},
			{Event: "stream_end", Payload: map[string]any{"session_id": sid}, At: at + 2.1},
		}})
	}
	if err := webuiclient.WriteSession(dir, webuiclient.Session{ID: sid, Messages: msgs, Runs: runs}); err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-data", data}, &out, &errw); code != 0 {
		t.Fatalf("import: %d\n%s%s", code, out.String(), errw.String())
	}
	w := openWorkbenchOn(t, data)
	w.focusByHash(sid)
	want := strings.Join(ids, ",")
	waitJS[bool](w, "the three imported runs in the order they started", jsRunIDs+` === `+jsq(want), stateTimeout)
	got := evalJS[string](w, "user messages", `[...document.querySelectorAll('[data-testid="transcript"] [data-testid="user-message"]')].map((e) => e.textContent).join("|")`)
	if got != strings.Join(prompts, "|") {
		w.fatal("user messages %q, want %q", got, strings.Join(prompts, "|"))
	}
	w.noExceptions()
}

// jsAtEnd is an expression: the transcript is scrolled to its end.
const jsAtEnd = `(() => { const s = document.getElementById("transcript-scroll"); return s.scrollHeight - s.scrollTop - s.clientHeight < 48; })()`

// Opening the queue panel shrinks the transcript's area; a user who was
// following the stream still follows it: the pane stays at the end as the
// answer grows, and no "Latest" button is offered.
func TestBrowser_QueuePanelKeepsFollowing(t *testing.T) {
	w := openWorkbench(t)
	_, rid := w.startRun("follow me", simOpts{tokens: 3000, tokenMS: 8})
	waitJS[bool](w, "enough text to scroll", `(() => { const s = document.getElementById("transcript-scroll"); return s.scrollHeight > s.clientHeight + 200; })()`, stateTimeout)
	waitJS[bool](w, "following the stream", jsAtEnd, stateTimeout)
	w.do("open the queue", chromedp.Click(chromedp.CSS(tid("queue-toggle"))))
	waitJS[bool](w, "the queue panel open", `!document.querySelector(`+jsq(tid("queue-panel"))+`).hidden`, stateTimeout)
	mark := evalJS[int](w, "text so far", jsRunText(rid)+`.length`)
	waitJS[bool](w, "more text after the panel opened", jsRunText(rid)+`.length > `+strconv.Itoa(mark+2000), stateTimeout)
	for range 5 {
		if !evalJS[bool](w, "at the end", jsAtEnd) {
			w.fatal("the transcript stopped following the stream after the queue panel opened")
		}
		if !evalJS[bool](w, "no jump button", `document.querySelector(`+jsq(tid("jump-latest"))+`).hidden`) {
			w.fatal("the Latest button shows while the user follows the stream")
		}
		mark = evalJS[int](w, "text so far", jsRunText(rid)+`.length`)
		waitJS[bool](w, "more text", jsRunText(rid)+`.length > `+strconv.Itoa(mark+300), stateTimeout)
	}
	w.do("click stop-button", chromedp.Click(chromedp.CSS(tid("stop-button"))))
	waitJS[bool](w, "the cancelled banner", jsBanner(rid)+` === "cancelled"`, stateTimeout)
	w.noExceptions()
}

// The "N new" pill covers no row of the list: it has a strip of its own
// above the first row.
func TestBrowser_NewPillCoversNoRow(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	for _, title := range []string{"one", "two"} {
		httpSession(t, base, title)
	}
	waitJS[bool](w, "two rows", `document.querySelectorAll(`+jsq(tid("session-item"))+`).length === 2`, stateTimeout)
	type rect struct{ X, Y, W, H float64 }
	r := evalJS[rect](w, "the list's rectangle", `(() => { const b = document.querySelector(`+jsq(tid("session-list"))+`).getBoundingClientRect(); return { X: b.x, Y: b.y, W: b.width, H: b.height }; })()`)
	w.moveMouse(r.X+r.W/2, r.Y+20)
	httpSession(t, base, "created elsewhere")
	waitJS[bool](w, "the new pill", `!document.querySelector(`+jsq(tid("new-pill"))+`).hidden`, stateTimeout)
	overlap := evalJS[string](w, "the pill over a row", `(() => {
		const p = document.querySelector(`+jsq(tid("new-pill"))+`).getBoundingClientRect();
		for (const e of document.querySelectorAll('[data-testid="session-item"]')) {
			const b = e.getBoundingClientRect();
			if (p.left < b.right && b.left < p.right && p.top < b.bottom && b.top < p.bottom) return e.dataset.sessionId + " at " + b.top + ", the pill " + p.top + "–" + p.bottom;
		}
		return "";
	})()`)
	if overlap != "" {
		w.fatal("the new pill covers the row of %s", overlap)
	}
	w.noExceptions()
}
