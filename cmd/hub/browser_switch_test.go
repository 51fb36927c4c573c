package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/protocol"
)

// finishedRun starts a sim run of n tokens in a new session over HTTP
// (not shown by the page while it streams) and waits for its end.
func finishedRun(t *testing.T, base, title string, tokens int) (sid, rid string) {
	t.Helper()
	var s struct {
		SessionID string `json:"session_id"`
	}
	if code := call(t, "POST", base+"/v1/sessions", map[string]any{"title": title}, &s); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	rid = httpRun(t, base, s.SessionID, title, map[string]any{"tokens": tokens, "token_ms": 0, "tools": 0})
	// 10,000 appends take a while under the race detector on a busy machine.
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var st protocol.RunStatus
		if code := call(t, "GET", base+"/v1/runs/"+rid, nil, &st); code == 200 && st.Terminal {
			return s.SessionID, rid
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s did not end within 5 minutes", rid)
	return s.SessionID, rid
}

// plainReplayBytes is what a focus of sid costs a client without
// compact_replay: the bytes of its event messages up to `replayed`.
func plainReplayBytes(t *testing.T, base, sid string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/ws", &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(16 << 20)
	for _, m := range []string{`{"type":"hello","client":"plain"}`, `{"type":"focus","session_id":"` + sid + `"}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("plain replay: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, `{"type":"event"`):
				n += len(line)
			case strings.HasPrefix(line, `{"type":"replayed"`):
				return n
			}
		}
	}
}

// switchRounds is how many times TestBrowser_SwitchToFinishedRunIsCompact
// switches to each run, each time in a freshly loaded page.
const switchRounds = 3

// Switching to a finished 3,000-token run, and to a 10,000-event one, in a
// freshly loaded page: the whole answer is shown, and the socket carried at
// most 10 % of the bytes a per-event replay costs (the page asks for
// compacted catch-up). It switches switchRounds times to each (reloading
// the page in between) and logs, never asserts, the time from the click to
// the frame that shows the run's end, what of it the page's main thread
// was busy (thread time: script, layout, style), and the load average
// (docs/benchmarks.md records them). RUNHUB_SWITCH_TOKENS=1000,10000,…
// switches to runs of those token counts instead (the cost curve there).
func TestBrowser_SwitchToFinishedRunIsCompact(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	type target struct {
		name   string
		tokens int
		sid    string
		rid    string
		plain  int       // bytes of a per-event replay
		shown  []float64 // click → shown of every round, ms
	}
	targets := []*target{{name: "3,000 tokens", tokens: 3000}, {name: "10,000 events", tokens: 10000}}
	if sizes := os.Getenv("RUNHUB_SWITCH_TOKENS"); sizes != "" {
		// The cost curve of docs/benchmarks.md: runs of other sizes.
		targets = targets[:0]
		for _, f := range strings.Split(sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > sim.MaxTokens {
				t.Fatalf("RUNHUB_SWITCH_TOKENS: %q is not a token count 1..%d", f, sim.MaxTokens)
			}
			targets = append(targets, &target{name: strconv.Itoa(n) + " tokens", tokens: n})
		}
	}
	for _, tg := range targets {
		tg.sid, tg.rid = finishedRun(t, base, "switch "+tg.name, tg.tokens)
		tg.plain = plainReplayBytes(t, base, tg.sid)
	}
	// A third session holds the focus when the page loads.
	other, _ := finishedRun(t, base, "elsewhere", 3)

	var mu sync.Mutex
	recv := 0
	ctx, stop := context.WithCancel(w.ctx)
	defer stop()
	if err := chromedp.Listen(ctx, func(ev any) {
		if f, ok := ev.(*network.EventWebSocketFrameReceived); ok && f.Response != nil {
			mu.Lock()
			recv += len(f.Response.PayloadData)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	w.enableThreadTimes()

	for round := 1; round <= switchRounds; round++ {
		for _, tg := range targets {
			// A new query string loads the page afresh (a new hash alone
			// would not), focused elsewhere.
			w.do("load focused elsewhere", chromedp.Navigate(base+"/?round="+strconv.Itoa(round)+"-"+strconv.Itoa(tg.tokens)+"#/s/"+other))
			w.waitConnected()
			waitJS[bool](w, "the session in the list, the other session's replay in", `!!document.querySelector(`+jsq(itemSel(tg.sid))+`) && !window.runhub.replaying`, stateTimeout)
			// Let the page's start (its history read, the profiles) settle, so
			// the click is measured alone.
			time.Sleep(300 * time.Millisecond)
			last := "w" + strconv.Itoa(tg.tokens-1) + " "
			mu.Lock()
			recv = 0
			mu.Unlock()
			before := w.threadTimes()
			// Click, then look at every animation frame until one shows the
			// run's completed banner and its last token.
			ectx, cancel := context.WithTimeout(w.ctx, runTimeout)
			ms, err := chromedp.Run(ectx, chromedp.Evaluate[float64](`new Promise((resolve, reject) => {
				const t0 = performance.now();
				window.__marks = [];
				// When the client reads them (before the page handles them).
				const off = window.runhub.on("message", (m) => {
					if (m.type === "event" && window.__marks.length === 0) window.__marks.push(["first event", Math.round(performance.now() - t0)]);
					if (m.type === "replayed") {
						window.__marks.push(["replayed", Math.round(performance.now() - t0)]);
						off();
					}
				});
				document.querySelector(`+jsq(itemSel(tg.sid))+`).click();
				const check = () => {
					const text = `+jsRunText(tg.rid)+`;
					if (`+jsBanner(tg.rid)+` === "completed" && text.trimEnd().endsWith(`+jsq(strings.TrimSpace(last))+`)) return resolve(performance.now() - t0);
					if (performance.now() - t0 > 60000) return reject(new Error("not shown within 60 s"));
					requestAnimationFrame(check);
				};
				requestAnimationFrame(check);
			})`, chromedp.EvalAwaitPromise))
			cancel()
			if err != nil {
				w.fatal("switch to %s: %v", tg.name, err)
			}
			busy := w.threadTimes().sub(before)
			got := evalJS[string](w, "run text", jsRunText(tg.rid))
			if strings.TrimSpace(got) != strings.TrimSpace(simText(tg.tokens)) {
				w.fatal("%s: the shown text (%d chars) is not the sim text (%d chars)", tg.name, len(got), len(simText(tg.tokens)))
			}
			// The frames of the replay have arrived by the time it is shown;
			// statuses of the other sessions may add a little.
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			n := recv
			mu.Unlock()
			tg.shown = append(tg.shown, ms)
			t.Logf("%s, round %d: click → shown %.0f ms %v; main thread busy %s; %d bytes received (a per-event replay: %d bytes, %.1f %%); load average %s",
				tg.name, round, ms, evalJS[any](w, "marks", `window.__marks`), busy, n, tg.plain, 100*float64(n)/float64(tg.plain), loadAverage())
			if n*10 > tg.plain {
				w.fatal("%s: the switch received %d bytes, more than 10 %% of a per-event replay's %d", tg.name, n, tg.plain)
			}
		}
	}
	// Round 1 is the browser's first switch to the run, nothing of it
	// cached yet (compiled code, the shapes of its words): what a user
	// meets. The later rounds reload the page in the same browser.
	for _, tg := range targets {
		t.Logf("%s: click → shown %.0f ms in round 1; %s ms after a reload", tg.name, tg.shown[0], fmtMillis(tg.shown[1:]))
	}
	w.noExceptions()
}

// threadTimes is the page's main-thread time so far, in ms, by kind (from
// the DevTools Performance domain, in thread time: a busy machine that
// makes the page wait for a core stretches the wall time, not these).
type threadTimes map[string]float64

var threadTimeMetrics = []struct{ metric, name string }{
	{"TaskDuration", "total"}, {"ScriptDuration", "script"}, {"LayoutDuration", "layout"}, {"RecalcStyleDuration", "style"},
}

// enableThreadTimes turns the Performance domain on, measuring thread time.
func (w *workbench) enableThreadTimes() {
	w.t.Helper()
	w.do("enable the Performance domain", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, performance.Enable, performance.EnableParams{TimeDomain: performance.EnableTimeDomainThreadTicks})
		return err
	}))
}

func (w *workbench) threadTimes() threadTimes {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, actionTimeout)
	defer cancel()
	res, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (performance.GetMetricsResult, error) {
		return cdp.Call(ctx, t, performance.GetMetrics, cdp.Empty{})
	})
	if err != nil {
		w.fatal("read the page's metrics: %v", err)
	}
	out := threadTimes{}
	for _, m := range res.Metrics {
		for _, k := range threadTimeMetrics {
			if m.Name == k.metric {
				out[k.name] = m.Value * 1000
			}
		}
	}
	return out
}

func (a threadTimes) sub(b threadTimes) threadTimes {
	out := threadTimes{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

func (a threadTimes) String() string {
	parts := make([]string, 0, len(threadTimeMetrics))
	for _, k := range threadTimeMetrics {
		parts = append(parts, fmt.Sprintf("%s %.0f ms", k.name, a[k.name]))
	}
	return strings.Join(parts, ", ")
}

// loadAverage is the machine's 1-, 5- and 15-minute load average, as the
// figures beside it need it read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func fmtMillis(ms []float64) string {
	parts := make([]string, len(ms))
	for i, v := range ms {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(parts, ", ")
}

// A run read over HTTP up to some seq, then a compacted record from the
// socket that starts before that seq (the two race on a focus): the text
// shows once, nothing twice, nothing lost. It drives the page's own
// transcript module.
func TestBrowser_CompactedRecordAfterHistory(t *testing.T) {
	w := openWorkbench(t)
	ctx, cancel := context.WithTimeout(w.ctx, actionTimeout)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const { SessionView } = await import("/transcript.js");
		const v = new SessionView("s_x", { status: () => undefined, fetchJSON: async () => ({ runs: [], more: false }), keepScroll: (_, fn) => fn(), loadOlder: () => {} });
		const ev = (seq, type, payload, extra = {}) => ({ event_id: "r_x:" + seq, seq, run_id: "r_x", session_id: "s_x", type, created_at: 1, terminal: false, payload, ...extra });
		const run = v.runView("r_x");
		// Read over HTTP: run.started, then w0..w3 (seqs 2..5).
		run.apply(ev(1, "run.started", { message: "hi" }), true);
		for (let i = 0; i < 4; i++) run.apply(ev(2 + i, "token.delta", { message_id: "m1", text: "w" + i + " " }), true);
		// The socket's compacted record of seqs 2..9: w0..w7.
		run.apply(ev(9, "token.delta", { message_id: "m1", text: "w0 w1 w2 w3 w4 w5 w6 w7 " }, { seq_from: 2 }));
		run.apply(ev(10, "token.delta", { message_id: "m1", text: "w8 " }));
		v.renderText();
		return run.el.querySelector('[data-testid="assistant-text"]').textContent;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		w.fatal("drive the transcript: %v", err)
	}
	if want := "w0 w1 w2 w3 w4 w5 w6 w7 w8"; strings.TrimSpace(got) != want {
		w.fatal("the run shows %q, want %q", got, want)
	}
	w.noExceptions()
}

// An answer past the Markdown limit (64 KiB) streams as plain text in
// blocks of at most 8 KiB, cut after a space (the sim's text has no
// newline), that together are the whole answer, the caret on the last one
// while it streams (the run is fast, so the test sets the streaming class
// itself); a block is laid out only near the screen
// (content-visibility), which is what makes switching to a 100,000-event
// run fast (docs/benchmarks.md).
func TestBrowser_LongAnswerInBlocks(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	var s struct {
		SessionID string `json:"session_id"`
	}
	if code := call(t, "POST", base+"/v1/sessions", map[string]any{"title": "long answer"}, &s); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	w.do("open the session", chromedp.Navigate(base+"/#/s/"+s.SessionID))
	w.waitConnected()
	const tokens = 12000 // 76 KB of text
	rid := httpRun(t, base, s.SessionID, "a long answer", map[string]any{"tokens": tokens, "token_ms": 0, "tools": 0})
	chunks := runSel(rid) + " " + tid("assistant-text") + " .text-chunk"
	waitJS[bool](w, "the run's end", jsBanner(rid)+` === "completed"`, runTimeout)
	got := evalJS[[]string](w, "the blocks", `[...document.querySelectorAll(`+jsq(chunks)+`)].map((c) => c.textContent)`)
	want := simText(tokens)
	if strings.Join(got, "") != want || strings.TrimSpace(evalJS[string](w, "run text", jsRunText(rid))) != strings.TrimSpace(want) {
		t.Fatalf("the blocks (%d) are not the answer (%d chars)", len(got), len(want))
	}
	if len(got) < len(want)/8192 {
		t.Fatalf("%d blocks for %d chars, want at least %d", len(got), len(want), len(want)/8192)
	}
	for i, c := range got {
		if len(c) > 8192 || (i < len(got)-1 && (!strings.HasSuffix(c, " ") || len(c) < 4096)) {
			t.Fatalf("block %d of %d has %d chars, ends %q: want 4-8 KiB cut after a space", i, len(got), len(c), c[max(0, len(c)-8):])
		}
	}
	// The caret, were it still streaming, goes after the last block only.
	caret := evalJS[string](w, "the caret", `(() => {
		const c = document.querySelectorAll(`+jsq(chunks)+`);
		c[0].parentElement.classList.add("streaming");
		const got = getComputedStyle(c[c.length - 1], "::after").content + "|" + getComputedStyle(c[0], "::after").content +
			"|" + getComputedStyle(c[0].parentElement, "::after").content;
		c[0].parentElement.classList.remove("streaming");
		return got;
	})()`)
	if caret != `"▍"|none|none` {
		t.Errorf("the caret (last block | first block | the message) is %q, want it after the last block only", caret)
	}
	if v := evalJS[string](w, "a block's content-visibility", `getComputedStyle(document.querySelector(`+jsq(chunks)+`)).contentVisibility`); v != "auto" {
		t.Errorf("a block's content-visibility is %q, want auto", v)
	}
	w.noExceptions()
}
