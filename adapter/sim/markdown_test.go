package sim_test

import (
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter/sim"
)

// The markdown chunks concatenate to the sample, each a word and the
// whitespace after it; the script takes the option.
func TestMarkdownChunks(t *testing.T) {
	chunks := sim.MarkdownChunks()
	if got := strings.Join(chunks, ""); got != sim.MarkdownSample {
		t.Fatalf("chunks join to %q", got)
	}
	for i, c := range chunks {
		if strings.TrimSpace(c) == "" || strings.ContainsAny(strings.TrimRight(c, " \t\n"), " \t\n") {
			t.Fatalf("chunk %d %q is not one word and its whitespace", i, c)
		}
	}
	s, err := sim.ParseScript([]byte(`{"sim":{"markdown":true,"token_ms":0}}`))
	if err != nil || !s.Markdown {
		t.Fatalf("ParseScript: %+v %v", s, err)
	}
}

// A long markdown answer is at least the size asked, made of numbered
// sections with every construct, and its chunks concatenate to it.
func TestLongMarkdown(t *testing.T) {
	s := sim.LongMarkdown(100)
	if len(s) < 100<<10 || len(s) > 101<<10 {
		t.Fatalf("%d bytes, want 100-101 KiB", len(s))
	}
	parts := strings.Count(s, "\n## Part ") + 1
	for _, c := range []string{"| field |", "```go", "**the journal's order**", "*each tab*", "~~old path~~", "  - a nested detail"} {
		if n := strings.Count(s, c); n != parts {
			t.Errorf("%q %d times in %d parts", c, n, parts)
		}
	}
	sc, err := sim.ParseScript([]byte(`{"sim":{"markdown":true,"markdown_kb":2000}}`))
	if err == nil {
		t.Fatalf("markdown_kb 2000 accepted: %+v", sc)
	}
}
