package driver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Turn is one message of a session's conversation as the journal recorded
// it: role "user" (a run's run.started message) or "assistant" (the run's
// token.delta text).
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// AttachedTurn is a Turn with the attachments its run's start carried
// (user turns only; none for an imported history). A driver that passes
// attachments (protocol.CapAttachments) sends them again with the message
// they came with; in JSON they follow role and content, and are left out
// when there are none.
type AttachedTurn struct {
	Turn
	Attachments []protocol.Attachment `json:"attachments,omitempty"`
}

// Transcript returns the conversation of the session's runs before this
// one, oldest first: for each earlier run the user's message and, when the
// run streamed any, the assistant's text. Drivers send it upstream as the
// conversation history. The journal stores payloads redacted, so a secret
// a user typed never travels back out through a transcript.
func (x *Execution) Transcript(ctx context.Context) ([]Turn, error) {
	turns, err := x.AttachedTranscript(ctx)
	return plainTurns(turns), err
}

// AttachedTranscript is Transcript with each user turn's attachments (its
// run's start request's, as the journal stored them: redacted).
func (x *Execution) AttachedTranscript(ctx context.Context) ([]AttachedTurn, error) {
	reg, ok := x.log.(interface {
		Session(ctx context.Context, id string) (journal.SessionMeta, error)
	})
	if !ok {
		return nil, errors.New("driver: the journal cannot list a session's runs")
	}
	return sessionTranscript(ctx, x.log, reg, x.SessionID, x.RunID)
}

func plainTurns(turns []AttachedTurn) []Turn {
	if turns == nil {
		return nil
	}
	out := make([]Turn, len(turns))
	for i, t := range turns {
		out[i] = t.Turn
	}
	return out
}

// HistoryKey is the key of a run's start request (journal.RunMeta.Request)
// under which an importer stores the conversation the session had before
// runhub ([]Turn, e.g. hermes-webui's context_messages): a transcript
// starts over from it at that run, whose own events it already holds.
const HistoryKey = "history"

// SessionTranscript is Transcript for any journal: the turns of the
// session's runs before the run before (every run when before is empty or
// not in the session). A run without run.started (an imported one) gives
// its start request's message as the user's.
func SessionTranscript(ctx context.Context, l journal.Log, reg interface {
	Session(ctx context.Context, id string) (journal.SessionMeta, error)
}, sessionID, before string) ([]Turn, error) {
	turns, err := sessionTranscript(ctx, l, reg, sessionID, before)
	return plainTurns(turns), err
}

func sessionTranscript(ctx context.Context, l journal.Log, reg interface {
	Session(ctx context.Context, id string) (journal.SessionMeta, error)
}, sessionID, before string) ([]AttachedTurn, error) {
	meta, err := reg.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var turns []AttachedTurn
	for _, rid := range meta.Runs {
		if rid == before {
			break
		}
		meta, err := l.Run(ctx, rid)
		if errors.Is(err, journal.ErrNotFound) {
			continue // trimmed by retention
		}
		if err != nil {
			return nil, err
		}
		var req struct {
			Message     string                `json:"message"`
			Attachments []protocol.Attachment `json:"attachments"`
			History     *[]Turn               `json:"history"`
		}
		if len(meta.Request) > 0 {
			json.Unmarshal(meta.Request, &req)
		}
		if req.History != nil {
			turns = turns[:0]
			for _, t := range *req.History {
				turns = append(turns, AttachedTurn{Turn: t})
			}
			continue
		}
		var user string
		var answer strings.Builder
		err = journal.ReadAll(ctx, l, rid, 0, func(e protocol.Envelope) error {
			switch e.Type {
			case protocol.EventRunStarted:
				var p protocol.RunStartedPayload
				if json.Unmarshal(e.Payload, &p) == nil {
					user = p.Message
				}
			case protocol.EventTokenDelta:
				var p protocol.TokenDeltaPayload
				if json.Unmarshal(e.Payload, &p) == nil {
					answer.WriteString(p.Text)
				}
			}
			return nil
		})
		if errors.Is(err, journal.ErrNotFound) {
			continue // trimmed by retention
		}
		if err != nil {
			return nil, err
		}
		if user == "" {
			user = req.Message
		}
		if user != "" {
			turns = append(turns, AttachedTurn{Turn: Turn{Role: "user", Content: user}, Attachments: req.Attachments})
		}
		if answer.Len() > 0 {
			turns = append(turns, AttachedTurn{Turn: Turn{Role: "assistant", Content: answer.String()}})
		}
	}
	return turns, nil
}
