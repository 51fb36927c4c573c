package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/runhub/runhub/protocol"
)

// GoalJudge is an optional capability: deciding, after a turn of a
// session with a standing goal, whether the goal is reached. The executor
// asks the judge of the run's profile (driver.Profile.Judge, else the
// run's driver when it is one) after every successful run while the goal
// is active, and once with an empty lastResponse when a goal is set or
// resumed on an idle session.
//
// An error is a judge that could not answer (unreachable, timed out, an
// upstream error: its message must be safe to show) or, wrapping
// ErrVerdictUnreadable, one whose answer held no verdict. Either way the
// executor fails open: the goal continues, its turn budget the backstop.
type GoalJudge interface {
	JudgeGoal(ctx context.Context, goal protocol.GoalUpdatedPayload, lastResponse string) (Verdict, error)
}

// Verdict is a judge's decision on a goal.
type Verdict struct {
	Kind   string // VerdictDone, VerdictContinue, VerdictBlocked or VerdictHold
	Reason string // one sentence, shown in goal.updated
}

// Verdict kinds.
const (
	VerdictDone     = "done"     // the goal is reached
	VerdictContinue = "continue" // not reached: another turn
	VerdictBlocked  = "blocked"  // it cannot be reached as stated, or needs the user: the goal pauses
	VerdictHold     = "hold"     // no decision: the goal stays active and nothing starts (the simulator's goal without turns=N)
)

// ErrVerdictUnreadable marks a judge's answer that holds no verdict (empty,
// not JSON). The executor counts such answers: MaxUnreadableVerdicts in a
// row pause the goal, so a judge model that cannot keep to the JSON
// contract does not spend the whole budget.
var ErrVerdictUnreadable = errors.New("the goal judge's answer holds no verdict")

// MaxUnreadableVerdicts is how many unreadable answers in a row pause a
// goal (Hermes Agent's DEFAULT_MAX_CONSECUTIVE_PARSE_FAILURES).
const MaxUnreadableVerdicts = 3

// Bounds of what a judge is shown, in characters (Hermes Agent's).
const (
	JudgeGoalChars     = 2000
	JudgeResponseChars = 4000
)

// JudgeSystemPrompt is the instruction of an LLM goal judge: the verdicts
// of Hermes Agent's goal judge that runhub acts on, and its one-line JSON
// answer (ParseVerdict reads it).
const JudgeSystemPrompt = "You judge whether an autonomous agent has reached the goal a user set. " +
	"You are given the goal and the agent's most recent response. Choose one verdict.\n\n" +
	"done: the goal is fully met. The response confirms it was completed, or shows the finished deliverable. " +
	"A response that only explains why the goal cannot be met is not done.\n\n" +
	"blocked: the goal cannot be met as stated (impossible, out of scope, no way to the deliverable), " +
	"or the agent has stopped and needs the user's input before any further step. Blocked is never a goal that was met.\n\n" +
	"continue: the goal is not met and the agent has a concrete next step it can take now. When in doubt, continue.\n\n" +
	"Reply ONLY with one JSON object on a single line, one of:\n" +
	`{"verdict": "done", "reason": "<one sentence>"}` + "\n" +
	`{"verdict": "blocked", "reason": "<one sentence>"}` + "\n" +
	`{"verdict": "continue", "reason": "<one sentence>"}` + "\n" +
	`The older shape {"done": <true|false>, "reason": "..."} is accepted too (true: done, false: continue).`

// JudgeTurns are the messages an LLM judge is sent: the instruction, then
// the goal and the agent's most recent response, each cut to its bound.
func JudgeTurns(goal, lastResponse string) []Turn {
	return []Turn{
		{Role: "system", Content: JudgeSystemPrompt},
		{Role: "user", Content: "Goal:\n" + CutChars(goal, JudgeGoalChars) +
			"\n\nAgent's most recent response:\n" + CutChars(lastResponse, JudgeResponseChars) +
			"\n\nIs the goal satisfied: done, blocked or continue?"},
	}
}

// CutChars cuts s to at most n characters, marking the cut.
func CutChars(s string, n int) string {
	i := 0
	for at := range s {
		if i == n {
			return s[:at] + "… [truncated]"
		}
		i++
	}
	return s
}

// ParseVerdict reads a judge's answer as Hermes Agent does: a JSON object,
// possibly in a code fence or amid other text, of the shape {"verdict":
// "done|continue|blocked|wait", "reason": "…"} or the older {"done": bool,
// "reason": "…"}. An unknown verdict is continue; so is wait, since runhub
// cannot park a goal on a process it does not see. An answer with no JSON
// object is an error wrapping ErrVerdictUnreadable.
func ParseVerdict(answer string) (Verdict, error) {
	text := strings.TrimSpace(answer)
	if text == "" {
		return Verdict{}, fmt.Errorf("%w: the answer is empty", ErrVerdictUnreadable)
	}
	obj, ok := jsonObject(text)
	if !ok {
		return Verdict{}, fmt.Errorf("%w: the answer is not JSON: %q", ErrVerdictUnreadable, CutChars(text, 200))
	}
	reason := ""
	if r, ok := obj["reason"].(string); ok {
		reason = strings.TrimSpace(r)
	}
	if reason == "" {
		reason = "no reason provided"
	}
	kind := VerdictContinue
	if v, ok := obj["verdict"].(string); ok {
		kind = strings.ToLower(strings.TrimSpace(v))
	} else if truthy(obj["done"]) {
		kind = VerdictDone
	}
	switch kind {
	case VerdictDone, VerdictBlocked, VerdictContinue:
	case "wait":
		kind, reason = VerdictContinue, reason+" (wait: continuing)"
	default:
		kind = VerdictContinue
	}
	return Verdict{Kind: kind, Reason: reason}, nil
}

// jsonObject finds the answer's JSON object: the whole text (a code fence
// peeled off), else the first object in it.
func jsonObject(text string) (map[string]any, bool) {
	if strings.HasPrefix(text, "```") {
		text = strings.Trim(text, "`")
		if nl := strings.IndexByte(text, '\n'); nl >= 0 {
			text = text[nl+1:] // the fence's language tag
		}
	}
	var obj map[string]any
	if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
		return obj, true
	}
	for i, tries := 0, 0; tries < 16; tries++ {
		at := strings.IndexByte(text[i:], '{')
		if at < 0 {
			break
		}
		i += at
		obj = nil
		if json.NewDecoder(bytes.NewReader([]byte(text[i:]))).Decode(&obj) == nil && obj != nil {
			return obj, true
		}
		i++
	}
	return nil, false
}

// truthy reads the older shape's "done" as Hermes Agent does.
func truthy(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "yes", "1", "done":
			return true
		}
	case float64:
		return v != 0
	}
	return false
}
