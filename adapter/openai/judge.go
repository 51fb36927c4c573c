package openai

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// DefaultJudgeTimeout bounds a goal judge's answer when its profile sets no
// timeout (Hermes Agent's DEFAULT_JUDGE_TIMEOUT).
const DefaultJudgeTimeout = 30 * time.Second

// maxVerdictBytes bounds the judge's answer kept for reading.
const maxVerdictBytes = 64 << 10

// JudgeGoal implements driver.GoalJudge, as Hermes Agent's auxiliary goal
// judge: one chat completion of the profile's model, not streamed, at
// temperature 0, given the goal and the agent's most recent response
// (driver.JudgeTurns), answered with one line of JSON (driver.ParseVerdict).
// Without a response to judge (a goal just set) it answers continue and
// calls nothing. Its errors are the run's (auth, rate_limited, timeout,
// provider_error, safe messages); its bound is the profile's timeout, else
// DefaultJudgeTimeout.
func (d *Driver) JudgeGoal(ctx context.Context, g protocol.GoalUpdatedPayload, lastResponse string) (driver.Verdict, error) {
	if strings.TrimSpace(lastResponse) == "" {
		return driver.Verdict{Kind: driver.VerdictContinue, Reason: "no response to judge"}, nil
	}
	if d.cfg.APIKeyEnv != "" && d.cfg.APIKey.Empty() {
		return driver.Verdict{}, &driver.Error{Code: CodeAuth,
			Message: "the API key variable " + d.cfg.APIKeyEnv + " is not set where the goal is judged"}
	}
	zero := 0.0
	turns := driver.JudgeTurns(g.Text, lastResponse)
	msgs := make([]Message, len(turns))
	for i, t := range turns {
		msgs[i] = Message{Role: t.Role, Content: t.Content}
	}
	body := chatRequest{Model: d.cfg.Model, Messages: msgs, Temperature: &zero}
	var answer collector
	if _, err := d.complete(ctx, body, &answer, cmp.Or(d.cfg.Timeout, DefaultJudgeTimeout), "goal judge", d.cfg.Logger); err != nil {
		return driver.Verdict{}, err
	}
	return driver.ParseVerdict(d.cfg.APIKey.Scrub(answer.text.String()))
}

// collector keeps the text of an answer (its token deltas), bounded.
type collector struct {
	text strings.Builder
}

func (c *collector) Emit(_ context.Context, typ protocol.EventType, payload any) (protocol.Envelope, error) {
	if p, ok := payload.(protocol.TokenDeltaPayload); ok && typ == protocol.EventTokenDelta {
		if room := maxVerdictBytes - c.text.Len(); room > 0 {
			c.text.WriteString(p.Text[:min(len(p.Text), room)])
		}
	}
	return protocol.Envelope{}, nil
}
