package web

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runhub/runhub/internal/npmtest"
)

// TestMarkdownAgainstMarkdownIt renders the CommonMark spec's examples of
// the constructs the workbench's renderer supports (static/markdown.js)
// with it and with markdown-it (pinned in markdown-test, test-only), and
// holds the outcome to markdown-test/differences.json: how many agree per
// section, and every example that differs with the reason it does. An
// example that starts to differ, or stops, fails the test with both
// renderings, so a change of the renderer is seen and the list kept true.
func TestMarkdownAgainstMarkdownIt(t *testing.T) {
	node, dir := npmtest.Install(t, "markdown-it and the CommonMark spec", "markdown-test", "package.json", "package-lock.json", "diff.mjs")
	renderer, err := filepath.Abs(filepath.Join("static", "markdown.js"))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Number     int    `json:"number"`
		Section    string `json:"section"`
		Agree      bool   `json:"agree"`
		Ours       string `json:"ours"`
		MarkdownIt string `json:"markdown_it"`
		Markdown   string `json:"markdown"`
		Feature    string `json:"feature"`
	}
	npmtest.RunJSON(t, node, dir, nil, &got, "diff.mjs", renderer)
	raw, err := os.ReadFile(filepath.Join("markdown-test", "differences.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Agree  map[string]string `json:"agree"`
		Differ map[string][]int  `json:"differ"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("differences.json: %v", err)
	}
	listed := map[int]string{}
	for reason, nums := range want.Differ {
		for _, n := range nums {
			listed[n] = reason
		}
	}
	counts := map[string][2]int{}
	for _, e := range got {
		c := counts[e.Section]
		c[1]++
		if e.Agree {
			c[0]++
		}
		counts[e.Section] = c
		reason, ok := listed[e.Number]
		switch {
		case e.Agree && ok:
			t.Errorf("example %d (%s) now agrees with markdown-it: take it out of differences.json (%q)", e.Number, e.Section, reason)
		case !e.Agree && !ok:
			t.Errorf("example %d (%s) differs from markdown-it (%s):\ninput:       %q\nours:        %s\nmarkdown-it: %s",
				e.Number, e.Section, orNone(e.Feature), e.Markdown, e.Ours, e.MarkdownIt)
		case !e.Agree && reason != e.Feature:
			t.Errorf("example %d (%s): differences.json says %q, diff.mjs finds %q", e.Number, e.Section, reason, e.Feature)
		}
	}
	var summary strings.Builder
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		c := counts[s]
		fmt.Fprintf(&summary, "\n  %s: %d of %d agree", s, c[0], c[1])
		if w := want.Agree[s]; w != fmt.Sprintf("%d of %d", c[0], c[1]) {
			t.Errorf("%s: %d of %d agree, differences.json says %q", s, c[0], c[1], w)
		}
	}
	if len(counts) != len(want.Agree) {
		t.Errorf("sections compared: %d, differences.json lists %d", len(counts), len(want.Agree))
	}
	t.Logf("CommonMark spec examples, the renderer against markdown-it:%s", summary.String())
}

func orNone(s string) string {
	if s == "" {
		return "no known reason"
	}
	return s
}
