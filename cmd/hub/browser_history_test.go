package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/protocol"
)

// httpSession creates a session over HTTP and returns its id.
func httpSession(t *testing.T, base, title string) string {
	t.Helper()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", base+"/v1/sessions", map[string]string{"title": title}, &sess); code != 201 {
		t.Fatalf("create session %q: %d", title, code)
	}
	return sess.SessionID
}

// httpRun starts a sim run over HTTP in session sid and returns its id.
func httpRun(t *testing.T, base, sid, message string, sim map[string]any) string {
	t.Helper()
	var run protocol.RunStartResult
	body := map[string]any{"message": message, "metadata": map[string]any{"sim": sim}}
	if code := call(t, "POST", base+"/v1/sessions/"+sid+"/runs", body, &run); code != 202 {
		t.Fatalf("start %q in %s: %d", message, sid, code)
	}
	return run.RunID
}

// waitRunEnd waits until the run has its terminal event.
func waitRunEnd(t *testing.T, base, rid string) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for time.Now().Before(deadline) {
		var st protocol.RunStatus
		if code := call(t, "GET", base+"/v1/runs/"+rid, nil, &st); code == 200 && st.Terminal {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s did not end within %v", rid, runTimeout)
}

// jsRunIDs is an expression: the run ids of the transcript, top to bottom,
// joined by commas.
const jsRunIDs = `[...document.querySelectorAll('[data-testid="transcript"] [data-testid="run"]')].map((r) => r.dataset.runId).join(",")`

// focusByHash focuses a session the way a link does.
func (w *workbench) focusByHash(sid string) {
	w.t.Helper()
	evalJS[bool](w, "set the hash", `(location.hash = "#/s/" + `+jsq(w.checkID("session", sid))+`, true)`)
	waitJS[bool](w, "session "+sid+" focused", jsFocused+` === `+jsq(sid), stateTimeout)
}

// Every run of a session is in its transcript, oldest first: after a
// focus, after a hub restart that interrupts the active run, and after a
// reload; a long session pages its earlier runs in on scroll-up.
func TestBrowser_HistoryAcrossReloadAndRestart(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	sid := httpSession(t, base, "history")
	r1 := httpRun(t, base, sid, "first question", map[string]any{"tokens": 4, "token_ms": 0, "tools": 0})
	waitRunEnd(t, base, r1)
	r2 := httpRun(t, base, sid, "second question", map[string]any{"tokens": 4, "token_ms": 0, "tools": 0, "fail": "error"})
	waitRunEnd(t, base, r2)
	r3 := httpRun(t, base, sid, "third question", map[string]any{"tokens": 100000, "token_ms": 20, "tools": 0})

	w.focusByHash(sid)
	want := strings.Join([]string{r1, r2, r3}, ",")
	waitJS[bool](w, "the three runs oldest first", jsRunIDs+` === `+jsq(want), stateTimeout)
	waitJS[bool](w, "run 1 completed, run 2 failed, run 3 streaming",
		jsBanner(r1)+` === "completed" && `+jsBanner(r2)+` === "failed" && `+jsBanner(r3)+` === "" && `+jsRunText(r3)+`.includes("w5 ")`, stateTimeout)
	prompts := evalJS[string](w, "user messages", `[...document.querySelectorAll('[data-testid="transcript"] [data-testid="user-message"]')].map((e) => e.textContent).join("|")`)
	if prompts != "first question|second question|third question" {
		w.fatal("user messages %q", prompts)
	}
	waitJS[bool](w, "the beginning of the session marked", `!!document.querySelector(`+jsq(tid("history-start"))+`)`, stateTimeout)

	// The hub dies mid-run and comes back on the same address and data.
	t.Logf("killing the hub in the middle of run %s", r3)
	w.hub.kill()
	w.hub = startHubAt(t, w.hub.addr, w.hub.data)
	w.waitConnected()
	waitJS[bool](w, "run 3 interrupted in the open tab", jsBanner(r3)+` === "interrupted"`, stateTimeout)
	r4 := httpRun(t, base, sid, "fourth question", map[string]any{"tokens": 4, "token_ms": 0, "tools": 0})
	waitRunEnd(t, base, r4)
	waitJS[bool](w, "run 4 completed in the open tab", jsBanner(r4)+` === "completed"`, stateTimeout)

	w.do("reload", chromedp.Reload())
	w.waitConnected()
	want = strings.Join([]string{r1, r2, r3, r4}, ",")
	waitJS[bool](w, "the four runs oldest first after the reload", jsRunIDs+` === `+jsq(want), stateTimeout)
	waitJS[bool](w, "every run's end after the reload",
		jsBanner(r1)+` === "completed" && `+jsBanner(r2)+` === "failed" && `+jsBanner(r3)+` === "interrupted" && `+jsBanner(r4)+` === "completed"`, stateTimeout)
	if got := evalJS[int](w, "banners", `document.querySelectorAll(`+jsq(tid("transcript")+" "+tid("terminal-banner"))+`).length`); got != 4 {
		w.fatal("%d terminal banners, want 4", got)
	}

	// A long session: its earlier runs page in as the user scrolls up.
	long := httpSession(t, base, "long")
	const n = 23
	var rids []string
	for i := range n {
		rid := httpRun(t, base, long, "step "+string(rune('A'+i)), map[string]any{"tokens": 2, "token_ms": 0, "tools": 0})
		waitRunEnd(t, base, rid)
		rids = append(rids, rid)
	}
	w.focusByHash(long)
	waitJS[bool](w, "the newest runs and a way to earlier ones",
		`document.querySelectorAll('[data-testid="transcript"] [data-testid="run"]').length >= 10 && !!document.querySelector(`+jsq(tid("history-more"))+`)`, stateTimeout)
	if shown := evalJS[int](w, "runs shown", `document.querySelectorAll('[data-testid="transcript"] [data-testid="run"]').length`); shown >= n {
		w.fatal("all %d runs shown before any scrolling; want a page", shown)
	}
	deadline := time.Now().Add(stateTimeout)
	for evalJS[string](w, "run ids", jsRunIDs) != strings.Join(rids, ",") {
		if time.Now().After(deadline) {
			w.fatal("scrolling up did not page in every run: %s", evalJS[string](w, "run ids", jsRunIDs))
		}
		evalJS[bool](w, "scroll to the top", `(document.getElementById("transcript-scroll").scrollTop = 0, true)`)
		time.Sleep(200 * time.Millisecond)
	}
	waitJS[bool](w, "the beginning of the long session marked", `!!document.querySelector(`+jsq(tid("history-start"))+`)`, stateTimeout)
	w.noExceptions()
}
