package hermeswebui

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Turn is one run read as a conversation turn: the user's message and the
// assistant's answer.
type Turn struct {
	RunID     string
	User      string
	UserAt    float64
	Assistant string
	Reasoning string
	At        float64 // the run's last event
}

// maxTurnText bounds the answer (and the reasoning) a Turn keeps.
const maxTurnText = 1 << 20

// ReadTurn reads run rid of l as a Turn. The user's message is run.started's,
// or the run's start request's for a run without one (an imported run).
func ReadTurn(ctx context.Context, l journal.Log, rid string) (Turn, error) {
	meta, err := l.Run(ctx, rid)
	if err != nil {
		return Turn{}, err
	}
	t := Turn{RunID: rid, UserAt: meta.CreatedAt, At: meta.CreatedAt}
	var answer, reasoning strings.Builder
	err = journal.ReadAll(ctx, l, rid, 0, func(e protocol.Envelope) error {
		t.At = e.CreatedAt
		switch e.Type {
		case protocol.EventRunStarted:
			if p, err := protocol.DecodePayload[protocol.RunStartedPayload](&e); err == nil {
				t.User = p.Message
			}
		case protocol.EventTokenDelta:
			if p, err := protocol.DecodePayload[protocol.TokenDeltaPayload](&e); err == nil && answer.Len() < maxTurnText {
				answer.WriteString(p.Text)
			}
		case protocol.EventReasoningDelta:
			if p, err := protocol.DecodePayload[protocol.ReasoningPayload](&e); err == nil && reasoning.Len() < maxTurnText {
				reasoning.WriteString(p.Text)
			}
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if t.User == "" && len(meta.Request) > 0 {
		var req struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(meta.Request, &req) == nil {
			t.User = req.Message
		}
	}
	t.Assistant, t.Reasoning = answer.String(), reasoning.String()
	return t, nil
}

// Messages are the turn as WebUI messages (its sidecar's messages shape).
func (t Turn) Messages() []map[string]any {
	var out []map[string]any
	if t.User != "" {
		out = append(out, map[string]any{"role": "user", "content": t.User, "timestamp": t.UserAt})
	}
	if t.Assistant != "" || t.Reasoning != "" {
		m := map[string]any{"role": "assistant", "content": t.Assistant, "timestamp": t.At}
		if t.Reasoning != "" {
			m["reasoning"] = t.Reasoning
		}
		out = append(out, m)
	}
	return out
}
