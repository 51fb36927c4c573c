package sim

import (
	"strconv"
	"strings"
)

// MarkdownSample is the answer of a run with metadata.sim.markdown: one of
// each construct a client's Markdown rendering should handle (a heading,
// emphasis, inline code, lists, links with a safe and an unsafe scheme, a
// fenced code block, a quote), and raw HTML that must show as text.
const MarkdownSample = "## Simulated answer\n\n" +
	"Here is **bold**, *emphasis*, ~~struck~~ and `inline code`.\n\n" +
	"- first item\n" +
	"- second item with a [safe link](https://example.com/docs)\n" +
	"- a [bad link](javascript:alert(1)) stays text\n\n" +
	"1. one\n" +
	"2. two\n\n" +
	"```go\n" +
	"func main() {\n" +
	"\tfmt.Println(\"<b>not bold</b>\")\n" +
	"}\n" +
	"```\n\n" +
	"> a quoted line\n\n" +
	"Raw HTML is text: <img src=x onerror=\"window.__pwned=1\"> and <script>window.__pwned=2</script> end.\n"

// MarkdownChunks cuts MarkdownSample into the token deltas a markdown run
// streams: each a word with the whitespace after it, so that the deltas
// concatenate to the sample exactly.
func MarkdownChunks() []string { return WordChunks(MarkdownSample) }

// LongMarkdown is the answer of a run with metadata.sim.markdown_kb: numbered
// sections, each a heading, a paragraph with strong, emphasis, struck and
// inline code text, a nested list, a table and a fenced code block, up to
// at least kb KiB (what a long model answer streams into the workbench).
func LongMarkdown(kb int) string {
	var b strings.Builder
	for i := 1; b.Len() < kb<<10; i++ {
		n := strconv.Itoa(i)
		b.WriteString("## Part " + n + "\n\n" +
			"Step " + n + " keeps **the journal's order** while *each tab* reads `seq " + n + "`; ~~old path~~ replaced, and snake_case_names stay text.\n\n" +
			"- first point of " + n + " with `code`\n  - a nested detail, *emphasised*\n- second point with a [link](https://example.com/" + n + ")\n\n" +
			"| field | value " + n + " | note |\n|:--|--:|---|\n| `run_id` | " + n + " | **kept** |\n| status | running | *live* |\n\n" +
			"```go\nfunc part" + n + "() int {\n\treturn " + n + " * 2 // <b>not bold</b>\n}\n```\n\n")
	}
	return b.String()
}

// WordChunks cuts s into words (the token deltas of a markdown run), each with the whitespace after it.
func WordChunks(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexAny(s, " \t\n")
		if i < 0 {
			out = append(out, s)
			break
		}
		j := i
		for j < len(s) && strings.IndexByte(" \t\n", s[j]) >= 0 {
			j++
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}
