package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/runhub/runhub/protocol"
)

// jsAroundSteer is an expression: the run's assistant text shown above its
// steer entry and below it, in page order.
func jsAroundSteer(rid string) string {
	return `(() => {
		const run = document.querySelector(` + jsq(runSel(rid)) + `);
		const out = { Before: "", After: "", Steers: 0 };
		if (!run) return out;
		for (const el of run.querySelectorAll('[data-testid="assistant-text"], [data-kind="steer"]')) {
			if (el.dataset.kind === "steer") out.Steers++;
			else if (out.Steers) out.After += el.textContent;
			else out.Before += el.textContent;
		}
		return out;
	})()`
}

// A steer is drawn at its place in the run (by seq): the text journaled
// before it above it, the text after it below it, live and after a reload
// (issue 24: it was drawn below the whole run's text).
func TestBrowser_SteerAtItsPlace(t *testing.T) {
	w := openWorkbench(t)
	_, rid := w.startRun("steer in place", simOpts{tokens: 250, tokenMS: 20})
	waitJS[bool](w, "the first tokens", jsRunText(rid)+`.includes("w20 ")`, stateTimeout)
	w.do("steer",
		chromedp.SetValue(chromedp.CSS(tid("queue-input")), "go left at the fork"),
		chromedp.SetValue(chromedp.CSS(tid("queue-mode")), "steer"),
		chromedp.Click(chromedp.CSS(tid("queue-submit"))))
	waitJS[bool](w, "the run completed", jsBanner(rid)+` === "completed"`, runTimeout)

	// What the journal says: the tokens before the steer and after it.
	var before, after strings.Builder
	steered := false
	for _, e := range allEvents(t, w.hub.URL(), rid) {
		switch e.Type {
		case protocol.EventProgress:
			var p struct {
				Steer string `json:"steer"`
			}
			if json.Unmarshal(e.Payload, &p) == nil && p.Steer != "" {
				steered = true
			}
		case protocol.EventTokenDelta:
			p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			if steered {
				after.WriteString(p.Text)
			} else {
				before.WriteString(p.Text)
			}
		}
	}
	if !steered || before.Len() == 0 || after.Len() == 0 {
		w.fatal("the journal has steer %v with %d bytes of text before and %d after; want text on both sides", steered, before.Len(), after.Len())
	}
	type around struct {
		Before, After string
		Steers        int
	}
	check := func(when string) {
		got := evalJS[around](w, "text around the steer", jsAroundSteer(rid))
		if got.Steers != 1 || strings.TrimSpace(got.Before) != strings.TrimSpace(before.String()) || strings.TrimSpace(got.After) != strings.TrimSpace(after.String()) {
			w.fatal("%s: %d steer entries; above it %q…%q, below it %q…%q; want above …%q and below %q…",
				when, got.Steers, head(got.Before), tail(got.Before, 40), head(got.After), tail(got.After, 40), tail(before.String(), 40), head(after.String()))
		}
	}
	check("live")
	w.do("reload", chromedp.Reload())
	w.waitConnected()
	waitJS[bool](w, "the run replayed", jsBanner(rid)+` === "completed"`, stateTimeout)
	check("after the reload")
	w.noExceptions()
}

func head(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}
