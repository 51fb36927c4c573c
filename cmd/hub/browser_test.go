package main

// Browser tests: the embedded workbench (web/static) in real headless
// Chromium, driven with chromedp against a hub running as a child process
// (startHub). They need Chromium: the Debian package `chromium`, or the path
// of a Chromium/Chrome binary in RUNHUB_CHROMIUM. Without it they fail; they
// never skip.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/runhub/runhub/protocol"
)

// The default waits. Every wait in these tests is bounded by one of them.
const (
	browserStartTimeout = 60 * time.Second // Chromium start, first tab
	actionTimeout       = 20 * time.Second // one navigation, click or evaluation
	stateTimeout        = 30 * time.Second // a UI state the hub drives (status, prompt)
	runTimeout          = 90 * time.Second // a run streamed to its end
)

// simText is the answer of a sim run with n tokens (protocol.md §4: token i
// is "w<i> ").
func simText(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("w" + strconv.Itoa(i) + " ")
	}
	return b.String()
}

// chromiumPath finds the browser: RUNHUB_CHROMIUM, /usr/bin/chromium, then
// chromium or chromium-browser on PATH. A missing browser fails the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RUNHUB_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("RUNHUB_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("browser tests need Chromium and none was found (no /usr/bin/chromium, no chromium or chromium-browser on PATH): " +
		"install the Debian package `chromium` (apt-get install chromium) or set RUNHUB_CHROMIUM to a Chromium binary")
	return ""
}

// workbench is one headless Chromium tab showing the workbench of a hub.
type workbench struct {
	t    *testing.T
	ctx  context.Context // the tab; derive a timeout for each action
	hub  *hubProcess
	out  *syncBuffer // Chromium's stdout and stderr
	mu   sync.Mutex
	logs []string // console messages and uncaught exceptions of the page
	exc  []string // uncaught exceptions only
}

// openWorkbench starts a hub (with env added to its environment) and Chromium, loads the workbench and waits
// until its socket is welcomed. Everything it starts ends in t.Cleanup, and a
// last cleanup checks that no goroutine of this test outlives it.
func openWorkbench(t *testing.T, env ...string) *workbench {
	t.Helper()
	return openWorkbenchOn(t, t.TempDir(), env...)
}

// openWorkbenchOn is openWorkbench on a hub whose embedded journal is in
// data (a journal the test wrote first).
func openWorkbenchOn(t *testing.T, data string, env ...string) *workbench {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})

	w := startBrowser(t, startHub(t, data, env...))
	w.do("load the workbench", chromedp.Navigate(w.hub.URL()+"/"))
	w.waitConnected()
	return w
}

// startBrowser starts headless Chromium for a tab beside hub; it ends in
// t.Cleanup.
func startBrowser(t *testing.T, hub *hubProcess) *workbench {
	t.Helper()
	exe := chromiumPath(t)
	w := &workbench{t: t, hub: hub, out: &syncBuffer{}}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(w.out),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()   // closes the tab and the browser, waits for them
		cancelAlloc() // waits for the browser process
	})
	w.ctx = ctx

	// The first Run binds the browser's life to its context, so it runs on
	// ctx itself and is bounded from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start Chromium (%s): %v\nChromium output:\n%s", exe, err, tail(w.out.String(), 4000))
		}
	case <-time.After(browserStartTimeout):
		cancelTab()
		<-started
		t.Fatalf("Chromium (%s) did not start within %v\nChromium output:\n%s", exe, browserStartTimeout, tail(w.out.String(), 4000))
	}
	if err := chromedp.Listen(ctx, w.onEvent); err != nil {
		t.Fatalf("listen to the page: %v", err)
	}
	return w
}

// onEvent records the page's console output and uncaught exceptions. It runs
// on chromedp's read loop: record and return.
func (w *workbench) onEvent(ev any) {
	var line string
	isExc := false
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		line = "uncaught: " + d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			line += " " + d.Exception.Description
		}
		line += fmt.Sprintf(" (%s:%d:%d)", d.URL, d.LineNumber+1, d.ColumnNumber+1)
		isExc = true
	case *runtime.EventConsoleAPICalled:
		parts := make([]string, 0, len(ev.Args))
		for _, a := range ev.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, string(a.Value))
			}
		}
		line = "console." + string(ev.Type) + ": " + strings.Join(parts, " ")
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logs = append(w.logs, line)
	if isExc {
		w.exc = append(w.exc, line)
	}
}

// fatal ends the test with what the page showed at the time.
func (w *workbench) fatal(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), w.diagnose())
}

// diagnose describes the page, its console and the hub's log.
func (w *workbench) diagnose() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	snap, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
		conn: document.querySelector('[data-testid="conn-state"]')?.dataset.state,
		hash: location.hash,
		sessions: [...document.querySelectorAll('[data-testid="session-item"]')].map((e) => ({
			sid: e.dataset.sessionId, status: e.dataset.status,
			badge: e.querySelector('[data-testid="status-badge"]')?.dataset.status,
			tokens: e.querySelector('[data-testid="token-count"]')?.textContent })),
		runs: [...document.querySelectorAll('[data-testid="transcript"] [data-testid="run"]')].map((r) => ({
			run: r.dataset.runId, status: r.dataset.status, last_seq: r.dataset.lastSeq,
			banner: r.querySelector('[data-testid="terminal-banner"]')?.dataset.state,
			text: (r.querySelector('[data-testid="assistant-text"]')?.textContent || "").slice(-80) })),
		toasts: [...document.querySelectorAll('[data-testid="toast"]')].map((e) => e.textContent),
	}, null, 1)`))
	if err != nil {
		fmt.Fprintf(&b, "page snapshot: %v\n", err)
	} else {
		fmt.Fprintf(&b, "page: %s\n", snap)
	}
	w.mu.Lock()
	logs := append([]string(nil), w.logs...)
	w.mu.Unlock()
	if len(logs) > 40 {
		logs = logs[len(logs)-40:]
	}
	fmt.Fprintf(&b, "page console (last %d):\n  %s\n", len(logs), strings.Join(logs, "\n  "))
	fmt.Fprintf(&b, "hub output (tail):\n%s\n", tail(w.hub.out.String(), 3000))
	fmt.Fprintf(&b, "Chromium output (tail):\n%s", tail(w.out.String(), 1500))
	return b.String()
}

// noExceptions fails the test when the page threw an uncaught exception.
func (w *workbench) noExceptions() {
	w.t.Helper()
	w.mu.Lock()
	exc := append([]string(nil), w.exc...)
	w.mu.Unlock()
	if len(exc) > 0 {
		w.fatal("the page threw:\n  %s", strings.Join(exc, "\n  "))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// do runs actions within actionTimeout.
func (w *workbench) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		w.fatal("%s: %v", what, err)
	}
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](w *workbench, what, expr string) T {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		w.fatal("%s: %v", what, err)
	}
	return v
}

// waitJS polls a JavaScript expression in the page every 50ms until it is
// truthy and returns that value; it fails the test after d.
func waitJS[T any](w *workbench, what, expr string, d time.Duration) T {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, d+10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil {
		if errors.Is(err, chromedp.ErrPollingTimeout) {
			w.fatal("timed out after %v waiting for %s", d, what)
		}
		w.fatal("waiting for %s: %v", what, err)
	}
	return v
}

func (w *workbench) waitConnected() {
	w.t.Helper()
	waitJS[bool](w, "the workbench socket to be welcomed (conn-state open)",
		`!!window.runhub && document.querySelector('[data-testid="conn-state"]')?.dataset.state === "open"`, stateTimeout)
}

// tid is the CSS selector of a data-testid.
func tid(id string) string { return `[data-testid="` + id + `"]` }

var safeID = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

func (w *workbench) checkID(kind, id string) string {
	w.t.Helper()
	if !safeID.MatchString(id) {
		w.fatal("%s id %q has characters this test does not put in selectors", kind, id)
	}
	return id
}

// jsq is s as a JavaScript string literal.
func jsq(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func itemSel(sid string) string {
	return tid("session-item") + `[data-session-id="` + sid + `"]`
}

// runSel is the run's section in the transcript of the focused session.
func runSel(rid string) string {
	return tid("transcript") + " " + tid("run") + `[data-run-id="` + rid + `"]`
}

// jsBadge is an expression: the data-status of the session's status badge.
func jsBadge(sid string) string {
	return `(document.querySelector(` + jsq(itemSel(sid)+" "+tid("status-badge")) + `)?.dataset.status || "")`
}

// jsRunText is an expression: the assistant text of the run, as rendered.
func jsRunText(rid string) string {
	return `(document.querySelector(` + jsq(runSel(rid)+" "+tid("assistant-text")) + `)?.textContent || "")`
}

// jsBanner is an expression: the data-state of the run's terminal banner.
func jsBanner(rid string) string {
	return `(document.querySelector(` + jsq(runSel(rid)+" "+tid("terminal-banner")) + `)?.dataset.state || "")`
}

// jsFocused is an expression: the session the page's hash focuses.
const jsFocused = `(() => { const m = /^#\/s\/(.+)$/.exec(location.hash); return m ? decodeURIComponent(m[1]) : ""; })()`

// setChecked makes a checkbox checked or not by clicking it.
func (w *workbench) setChecked(testid string, on bool) {
	w.t.Helper()
	expr := `document.querySelector(` + jsq(tid(testid)) + `).checked`
	if evalJS[bool](w, testid+" checked?", expr) != on {
		w.do("click "+testid, chromedp.Click(chromedp.CSS(tid(testid))))
	}
	if got := evalJS[bool](w, testid+" checked?", expr); got != on {
		w.fatal("%s: checked %v after the click, want %v", testid, got, on)
	}
}

type simOpts struct {
	tokens, tokenMS int
	approval        bool
}

// startRun starts a run in a new session through the start form, the way a
// user does, and returns the session and run the page then focuses.
func (w *workbench) startRun(message string, o simOpts) (sid, rid string) {
	w.t.Helper()
	known := evalJS[[]string](w, "known sessions", `[...window.runhub.sessions.keys(), `+jsFocused+`]`)
	knownJSON, _ := json.Marshal(known)
	w.do("fill the start form",
		chromedp.SetValue(chromedp.CSS(tid("start-message")), message),
		chromedp.SetValue(chromedp.CSS(tid("sim-tokens")), strconv.Itoa(o.tokens)),
		chromedp.SetValue(chromedp.CSS(tid("sim-token-ms")), strconv.Itoa(o.tokenMS)),
	)
	w.setChecked("sim-approval", o.approval)
	w.setChecked("start-new-session", true)
	w.do("click start-submit", chromedp.Click(chromedp.CSS(tid("start-submit"))))

	sid = waitJS[string](w, "the page to focus the new session of "+jsq(message),
		`(() => { const sid = `+jsFocused+`; return sid && !`+string(knownJSON)+`.includes(sid) ? sid : ""; })()`, stateTimeout)
	w.checkID("session", sid)
	rid = waitJS[string](w, "the run of "+jsq(message)+" in the transcript",
		`document.querySelector(`+jsq(tid("transcript")+` .session-transcript[data-session-id="`+sid+`"] `+tid("run"))+`)?.dataset.runId || ""`, stateTimeout)
	w.checkID("run", rid)
	waitJS[bool](w, "the session status to name run "+rid,
		`window.runhub.sessions.get(`+jsq(sid)+`)?.run_id === `+jsq(rid), stateTimeout)
	return sid, rid
}

// Two runs in two new sessions stream at once: both list items go running,
// then completed; focusing one shows its full deterministic answer. A reload
// in the middle of a third run replays it and follows it live to the end,
// with every token exactly once.
func TestBrowser_TwoRunsBadgesFocusReload(t *testing.T) {
	w := openWorkbench(t)
	const n = 150
	want := simText(n)

	sidA, ridA := w.startRun("first browser run", simOpts{tokens: n, tokenMS: 30})
	sidB, ridB := w.startRun("second browser run", simOpts{tokens: n, tokenMS: 30})
	if sidA == sidB || ridA == ridB {
		w.fatal("two starts gave session %s run %s and session %s run %s", sidA, ridA, sidB, ridB)
	}
	t.Logf("started run %s in session %s and run %s in session %s", ridA, sidA, ridB, sidB)

	waitJS[bool](w, "both session items running at once",
		jsBadge(sidA)+` === "running" && `+jsBadge(sidB)+` === "running"`, stateTimeout)
	if got := evalJS[int](w, "session items", `document.querySelectorAll(`+jsq(tid("session-item"))+`).length`); got != 2 {
		w.fatal("%d session items, want 2", got)
	}
	waitJS[bool](w, "both session items completed",
		jsBadge(sidA)+` === "completed" && `+jsBadge(sidB)+` === "completed"`, runTimeout)
	for _, sid := range []string{sidA, sidB} {
		st := evalJS[string](w, "item status", `document.querySelector(`+jsq(itemSel(sid))+`).dataset.status`)
		tokens := evalJS[string](w, "item tokens", `document.querySelector(`+jsq(itemSel(sid)+" "+tid("token-count"))+`).textContent`)
		if st != "completed" || tokens != strconv.Itoa(n) {
			w.fatal("session %s: item status %q tokens %q, want completed and %d", sid, st, tokens, n)
		}
	}

	// B was started last, so it has the focus; click A.
	if got := evalJS[string](w, "focused session", jsFocused); got != sidB {
		w.fatal("focused %q after the second start, want %s", got, sidB)
	}
	w.do("click session A", chromedp.Click(chromedp.CSS(itemSel(sidA))))
	waitJS[bool](w, "session A focused", jsFocused+` === `+jsq(sidA), stateTimeout)
	waitJS[bool](w, "run A replayed to its completed banner", jsBanner(ridA)+` === "completed"`, stateTimeout)
	if got := evalJS[string](w, "run A text", jsRunText(ridA)); strings.TrimSpace(got) != strings.TrimSpace(want) {
		w.fatal("run A assistant text (%d chars) is not the sim text (%d chars):\n%q", len(got), len(want), tail(got, 300))
	}
	if got := evalJS[int](w, "runs shown", `document.querySelectorAll(`+jsq(tid("transcript")+" "+tid("run"))+`).length`); got != 1 {
		w.fatal("the transcript of session A shows %d runs, want 1", got)
	}
	if got := evalJS[string](w, "pane tokens", `document.querySelector(`+jsq(tid("pane-token-count"))+`).textContent`); got != strconv.Itoa(n)+" tokens" {
		w.fatal("pane token count %q, want %q", got, strconv.Itoa(n)+" tokens")
	}

	// Reload in the middle of a fresh run.
	const long = 300
	sidC, ridC := w.startRun("reload in the middle", simOpts{tokens: long, tokenMS: 30})
	waitJS[bool](w, "the first tokens of run C", jsRunText(ridC)+`.includes("w20 ")`, stateTimeout)
	t.Logf("reloading the page in the middle of run %s", ridC)
	var before protocol.RunStatus
	if code := call(t, "GET", w.hub.URL()+"/v1/runs/"+ridC, nil, &before); code != 200 || before.Terminal {
		w.fatal("run C before the reload: %d %+v, want a live run", code, before)
	}
	evalJS[bool](w, "mark the page", `window.__beforeReload = true`)
	w.do("reload", chromedp.Reload())
	if evalJS[bool](w, "page marker", `window.__beforeReload === true`) {
		w.fatal("the page was not reloaded")
	}
	w.waitConnected()
	waitJS[bool](w, "session C focused again from the URL", jsFocused+` === `+jsq(sidC), stateTimeout)
	// The reloaded page shows the run while it still streams: a replay, then
	// live events across the seam.
	waitJS[bool](w, "run C replayed and still streaming after the reload",
		jsRunText(ridC)+`.includes("w20 ") && `+jsBanner(ridC)+` === ""`, stateTimeout)
	waitJS[bool](w, "run C completed after the reload", jsBanner(ridC)+` === "completed"`, runTimeout)

	got := evalJS[string](w, "run C text", jsRunText(ridC))
	wantC := simText(long)
	if strings.TrimSpace(got) != strings.TrimSpace(wantC) {
		w.fatal("run C assistant text after the reload (%d chars) is not the sim text (%d chars): starts %q ends %q",
			len(got), len(wantC), got[:min(len(got), 120)], tail(got, 120))
	}
	if c := strings.Count(got, "w0 "); c != 1 {
		w.fatal(`run C: "w0 " appears %d times, want 1`, c)
	}
	if c := strings.Count(got, "w"+strconv.Itoa(long-1)+" "); c != 1 {
		w.fatal("run C: the last token appears %d times, want 1", c)
	}
	if c := evalJS[int](w, "assistant texts", `document.querySelectorAll(`+jsq(runSel(ridC)+" "+tid("assistant-text"))+`).length`); c != 1 {
		w.fatal("run C has %d assistant-text elements, want 1", c)
	}
	if c := evalJS[int](w, "runs shown", `document.querySelectorAll(`+jsq(tid("transcript")+" "+tid("run"))+`).length`); c != 1 {
		w.fatal("the transcript of session C shows %d runs, want 1", c)
	}
	// The page saw every event of the run up to the terminal one.
	events := allEvents(t, w.hub.URL(), ridC)
	last := events[len(events)-1]
	if !last.Terminal || last.Type != protocol.EventDone {
		w.fatal("run C ends with %s (terminal %v), want done", last.Type, last.Terminal)
	}
	lastSeq := strconv.FormatUint(last.Seq, 10)
	if got := evalJS[string](w, "run C last seq", `document.querySelector(`+jsq(runSel(ridC))+`).dataset.lastSeq`); got != lastSeq {
		w.fatal("run C rendered up to seq %s, the journal has %s", got, lastSeq)
	}
	if got := evalJS[int](w, "client last seq", `window.runhub.lastSeq(`+jsq(ridC)+`)`); strconv.Itoa(got) != lastSeq {
		w.fatal("the client delivered run C up to seq %d, the journal has %s", got, lastSeq)
	}
	w.noExceptions()
}

// An approval prompt is answered from its card and the run completes; a long
// run is stopped with the stop button and ends cancelled, with exactly one
// terminal event in the journal.
func TestBrowser_ApproveAndStop(t *testing.T) {
	w := openWorkbench(t)

	const n = 40
	sid, rid := w.startRun("needs approval", simOpts{tokens: n, tokenMS: 20, approval: true})
	waitJS[bool](w, "the approval card", `!!document.querySelector(`+jsq(runSel(rid)+" "+tid("approval-card"))+`)`, stateTimeout)
	waitJS[bool](w, "the session awaiting approval", jsBadge(sid)+` === "awaiting_approval"`, stateTimeout)
	once := runSel(rid) + " " + tid("approval-choice") + `[data-choice="once"]`
	w.do("click approval-choice once", chromedp.Click(chromedp.CSS(once)))
	waitJS[bool](w, "the approval card resolved with once",
		`(() => { const c = document.querySelector(`+jsq(runSel(rid)+" "+tid("approval-card"))+`); return c && c.dataset.state !== "pending" && c.dataset.choice === "once"; })()`, stateTimeout)
	waitJS[bool](w, "the approved run completed", jsBanner(rid)+` === "completed"`, runTimeout)
	waitJS[bool](w, "the session item completed", jsBadge(sid)+` === "completed"`, stateTimeout)
	if got := evalJS[string](w, "approved run text", jsRunText(rid)); strings.TrimSpace(got) != strings.TrimSpace(simText(n)) {
		w.fatal("approved run assistant text %q, want the sim text of %d tokens", tail(got, 200), n)
	}

	// Stop a long run from the pane.
	sid2, rid2 := w.startRun("stop me", simOpts{tokens: 2000, tokenMS: 20})
	waitJS[bool](w, "the first tokens of the long run", jsRunText(rid2)+`.includes("w10 ")`, stateTimeout)
	t.Logf("stopping run %s", rid2)
	w.do("click stop-button", chromedp.Click(chromedp.CSS(tid("stop-button"))))
	waitJS[bool](w, "the cancelled banner", jsBanner(rid2)+` === "cancelled"`, stateTimeout)
	waitJS[bool](w, "the session item cancelled", jsBadge(sid2)+` === "cancelled"`, stateTimeout)
	waitJS[bool](w, "the pane status cancelled and the stop button gone",
		`document.querySelector(`+jsq(tid("pane-status"))+`).dataset.status === "cancelled" && document.querySelector(`+jsq(tid("stop-button"))+`).hidden`, stateTimeout)
	if got := evalJS[int](w, "banners", `document.querySelectorAll(`+jsq(runSel(rid2)+" "+tid("terminal-banner"))+`).length`); got != 1 {
		w.fatal("the stopped run shows %d terminal banners, want 1", got)
	}
	text := evalJS[string](w, "stopped run text", jsRunText(rid2))
	if !strings.HasPrefix(simText(2000), text) || strings.Count(text, "w0 ") != 1 {
		w.fatal("the stopped run's text is not a prefix of the sim text: %q", tail(text, 200))
	}

	events := allEvents(t, w.hub.URL(), rid2)
	var terminals []protocol.Envelope
	for i, e := range events {
		if e.Seq != uint64(i+1) {
			w.fatal("run %s: event %d has seq %d", rid2, i, e.Seq)
		}
		if e.Terminal {
			terminals = append(terminals, e)
		}
	}
	if len(terminals) != 1 {
		w.fatal("run %s has %d terminal events, want 1: %+v", rid2, len(terminals), terminals)
	}
	last := events[len(events)-1]
	if last.Seq != terminals[0].Seq || last.Type != protocol.EventCancelled {
		w.fatal("run %s ends with %s seq %d; terminal %s seq %d; want one cancelled, last", rid2, last.Type, last.Seq, terminals[0].Type, terminals[0].Seq)
	}
	p, err := protocol.DecodePayload[protocol.CancelledPayload](&last)
	if err != nil || !p.Partial {
		w.fatal("cancelled payload %s (%v): want partial true", last.Payload, err)
	}
	w.noExceptions()
}
