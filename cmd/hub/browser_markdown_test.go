package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A sim run with markdown streams Markdown: the transcript renders its
// code block, lists, emphasis and a safe link, keeps an unsafe link and raw
// HTML as text, and runs no script of it — live and after a reload.
func TestBrowser_MarkdownRendersSafely(t *testing.T) {
	w := openWorkbench(t)
	base := w.hub.URL()
	sid := httpSession(t, base, "markdown")
	rid := httpRun(t, base, sid, "show me markdown", map[string]any{"markdown": true, "token_ms": 15, "tools": 0})
	w.focusByHash(sid)

	type rendered struct {
		Pre, Lang, H3, Strong, Em, Del, Inline, Link, LinkRel, Quote, Text string
		UL, OL, Images, Scripts, Bolds, Unsafe                             int
		Pwned                                                              bool
	}
	check := func(when string) {
		t.Helper()
		waitJS[bool](w, "the markdown run completed "+when, jsBanner(rid)+` === "completed"`, runTimeout)
		sel := jsq(runSel(rid) + " " + tid("assistant-text"))
		r := evalJS[rendered](w, "the rendered answer", `(() => { const a = document.querySelector(`+sel+`); const q = (s) => a.querySelector(s);
			return { Pre: q("pre > code")?.textContent || "", Lang: q("pre > code")?.dataset.lang || "", H3: q("h3")?.textContent || "",
			  Strong: q("strong")?.textContent || "", Em: q("em")?.textContent || "", Del: q("del")?.textContent || "",
			  Inline: q("p code")?.textContent || "", Link: q("a")?.getAttribute("href") || "", LinkRel: q("a")?.rel || "",
			  Quote: q("blockquote")?.textContent.trim() || "", Text: a.textContent,
			  UL: a.querySelectorAll("ul > li").length, OL: a.querySelectorAll("ol > li").length,
			  Images: a.querySelectorAll("img").length + document.querySelectorAll("img").length,
			  Scripts: a.querySelectorAll("script").length, Bolds: a.querySelectorAll("b").length,
			  Unsafe: a.querySelectorAll('a[href^="javascript"], [onerror], [onclick]').length, Pwned: window.__pwned !== undefined }; })()`)
		switch {
		case !strings.Contains(r.Pre, `fmt.Println("<b>not bold</b>")`) || r.Lang != "go":
			w.fatal("%s: code block %q (lang %q)", when, r.Pre, r.Lang)
		case r.UL != 3 || r.OL != 2:
			w.fatal("%s: %d unordered and %d ordered items, want 3 and 2", when, r.UL, r.OL)
		case r.H3 != "Simulated answer" || r.Strong != "bold" || r.Em != "emphasis" || r.Del != "struck" || r.Inline != "inline code" || r.Quote != "a quoted line":
			w.fatal("%s: inline rendering %+v", when, r)
		case r.Link != "https://example.com/docs" || !strings.Contains(r.LinkRel, "noopener"):
			w.fatal("%s: the safe link %q rel %q", when, r.Link, r.LinkRel)
		case r.Images != 0 || r.Scripts != 0 || r.Bolds != 0 || r.Unsafe != 0 || r.Pwned:
			w.fatal("%s: HTML in the text became elements or ran: %+v", when, r)
		case !strings.Contains(r.Text, `<img src=x onerror="window.__pwned=1">`) || !strings.Contains(r.Text, `<script>window.__pwned=2</script>`) ||
			!strings.Contains(r.Text, "[bad link](javascript:alert(1))"):
			w.fatal("%s: the raw HTML and the unsafe link are not shown as text: %q", when, r.Text)
		}
	}
	check("live")
	w.do("reload", chromedp.Reload())
	w.waitConnected()
	check("after a reload")
	w.noExceptions()
}
