package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
)

// A 100 KB Markdown answer (sim.LongMarkdown: headings, emphasis, inline
// and fenced code, nested lists, links, tables) streams into the focused
// pane: every part is rendered as Markdown (no plain-text fallback), no
// HTML of it becomes an element, and the test logs, never asserts, the
// page's main-thread time per token (thread time: script, layout, style)
// and the load average (docs/benchmarks.md records them).
// RUNHUB_STREAM_TOKEN_MS paces the tokens (default 0: as fast as the hub
// streams them); RUNHUB_STREAM_KB sets the size.
func TestBrowser_StreamLongMarkdown(t *testing.T) {
	kb, tokenMS := 100, 0
	if v := os.Getenv("RUNHUB_STREAM_KB"); v != "" {
		kb, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("RUNHUB_STREAM_TOKEN_MS"); v != "" {
		tokenMS, _ = strconv.Atoi(v)
	}
	w := openWorkbench(t)
	base := w.hub.URL()
	sid := httpSession(t, base, "long markdown")
	w.focusByHash(sid)
	w.enableThreadTimes()
	text := sim.LongMarkdown(kb)
	tokens := len(sim.WordChunks(text))
	parts := strings.Count(text, "## Part ")
	before := w.threadTimes()
	start := time.Now()
	rid := httpRun(t, base, sid, "a long markdown answer", map[string]any{"markdown": true, "markdown_kb": kb, "token_ms": tokenMS, "tools": 0})
	waitJS[bool](w, "the long answer's end", jsBanner(rid)+` === "completed"`, runTimeout+time.Duration(tokens*tokenMS)*time.Millisecond)
	wall := time.Since(start)
	busy := w.threadTimes().sub(before)
	type rendered struct{ Tables, Code, H3, Strong, Em, Del, Nested, Links, Chunks, Bolds int }
	sel := jsq(runSel(rid) + " " + tid("assistant-text"))
	r := evalJS[rendered](w, "the rendered answer", `(() => { const a = document.querySelector(`+sel+`); const n = (s) => a.querySelectorAll(s).length;
		return { Tables: n("table"), Code: n("pre > code"), H3: n("h3"), Strong: n("strong"), Em: n("em"), Del: n("del"),
		  Nested: n("li > ul > li"), Links: n("a[href^='https://example.com/']"), Chunks: n(".text-chunk"), Bolds: n("b") }; })()`)
	want := rendered{Tables: parts, Code: parts, H3: parts, Strong: 2 * parts, Em: 3 * parts, Del: parts, Nested: parts, Links: parts}
	if r != want {
		w.fatal("the %d parts rendered as %+v, want %+v", parts, r, want)
	}
	t.Logf("%d KB, %d tokens (token_ms %d) in %v: main thread busy %s, %.0f µs per token; load average %s",
		kb, tokens, tokenMS, wall.Round(time.Millisecond), busy, busy["total"]*1000/float64(tokens), loadAverage())
	w.noExceptions()
}
