package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter/driver"
)

// A judge's answer is read as Hermes Agent reads it: the verdict shape and
// the older done shape, in a code fence or amid prose; wait and unknown
// verdicts continue; no JSON object is unreadable.
func TestParseVerdict(t *testing.T) {
	tests := []struct {
		answer string
		kind   string
		reason string
	}{
		{`{"verdict": "done", "reason": "the tests pass"}`, driver.VerdictDone, "the tests pass"},
		{`{"verdict": "DONE", "reason": " shipped "}`, driver.VerdictDone, "shipped"},
		{`{"verdict": "blocked", "reason": "needs a password"}`, driver.VerdictBlocked, "needs a password"},
		{`{"verdict": "continue", "reason": "tests fail"}`, driver.VerdictContinue, "tests fail"},
		{`{"verdict": "wait", "wait_for_seconds": 30, "reason": "CI runs"}`, driver.VerdictContinue, "CI runs (wait: continuing)"},
		{`{"verdict": "maybe", "reason": "unsure"}`, driver.VerdictContinue, "unsure"},
		{`{"done": true, "reason": "legacy"}`, driver.VerdictDone, "legacy"},
		{`{"done": false, "reason": "legacy"}`, driver.VerdictContinue, "legacy"},
		{`{"done": "yes"}`, driver.VerdictDone, "no reason provided"},
		{`{"done": 0}`, driver.VerdictContinue, "no reason provided"},
		{`{"reason": "no verdict field"}`, driver.VerdictContinue, "no verdict field"},
		{"```json\n{\"verdict\": \"done\", \"reason\": \"fenced\"}\n```", driver.VerdictDone, "fenced"},
		{"Sure. {\"verdict\": \"blocked\", \"reason\": \"amid prose\"} Hope that helps {", driver.VerdictBlocked, "amid prose"},
		{"{not json} then {\"verdict\": \"done\", \"reason\": \"second object\"}", driver.VerdictDone, "second object"},
	}
	for _, tt := range tests {
		v, err := driver.ParseVerdict(tt.answer)
		if err != nil || v.Kind != tt.kind || v.Reason != tt.reason {
			t.Errorf("ParseVerdict(%q) = %+v, %v; want %s %q", tt.answer, v, err, tt.kind, tt.reason)
		}
	}
	for _, bad := range []string{"", "   ", "It is done.", "[1, 2]", `"done"`, "{broken"} {
		if v, err := driver.ParseVerdict(bad); !errors.Is(err, driver.ErrVerdictUnreadable) {
			t.Errorf("ParseVerdict(%q) = %+v, %v; want unreadable", bad, v, err)
		}
	}
}

// The judge is shown the goal and the response cut to Hermes Agent's
// bounds, in characters.
func TestJudgeTurns(t *testing.T) {
	turns := driver.JudgeTurns(strings.Repeat("g", 2500), strings.Repeat("é", 5000))
	if len(turns) != 2 || turns[0].Role != "system" || turns[0].Content != driver.JudgeSystemPrompt || turns[1].Role != "user" {
		t.Fatalf("turns %+v", turns)
	}
	u := turns[1].Content
	if !strings.Contains(u, "Goal:\n"+strings.Repeat("g", 2000)+"… [truncated]\n") ||
		!strings.Contains(u, "response:\n"+strings.Repeat("é", 4000)+"… [truncated]\n") {
		t.Errorf("user message not cut as expected (%d bytes)", len(u))
	}
	if got := driver.CutChars("short", 10); got != "short" {
		t.Errorf("CutChars = %q", got)
	}
}
