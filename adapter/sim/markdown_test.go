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
