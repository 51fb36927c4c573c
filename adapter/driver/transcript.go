package driver

import (
	"bytes"
	"cmp"
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
// (user turns only; none for an imported history) and the tool calls its
// run reported. A driver that passes attachments (protocol.CapAttachments)
// sends them again with the message they came with. The tool calls are on
// the run's assistant turn, or on its user turn when the run streamed no
// text (it has no assistant turn), so the turns are the same with or
// without them. In JSON both follow role and content, and are left out
// when there are none.
type AttachedTurn struct {
	Turn
	Attachments []protocol.Attachment `json:"attachments,omitempty"`
	ToolCalls   []ToolCall            `json:"tool_calls,omitempty"`
}

// ToolCall is one tool call of an earlier run as the journal recorded it
// (redacted): its tool.started's id, name and args, and its tool.done, if
// it came, as Done.
type ToolCall struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Args       json.RawMessage `json:"args"`
	// Done is the call's end; nil when the run ended before the tool did.
	Done *ToolDone `json:"done,omitempty"`
	// At is where the call started in its turn's Content: the bytes of
	// text the run had streamed before it (0 on a user turn).
	At int `json:"-"`
}

// ToolDone is a tool call's end: its tool.done but the id.
type ToolDone struct {
	Status     string          `json:"status"`
	DurationMS int64           `json:"duration_ms"`
	Error      bool            `json:"error"`
	Result     json.RawMessage `json:"result"`
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
// run's start request's, as the journal stored them: redacted) and each
// run's tool calls with their ends (AttachedTurn.ToolCalls), for a driver
// that sends them in its runtime's own form.
func (x *Execution) AttachedTranscript(ctx context.Context) ([]AttachedTurn, error) {
	reg, ok := x.log.(interface {
		Session(ctx context.Context, id string) (journal.SessionMeta, error)
	})
	if !ok {
		return nil, errors.New("driver: the journal cannot list a session's runs")
	}
	turns, _, err := sessionTranscript(ctx, x.log, reg, x.SessionID, x.RunID, false)
	return turns, err
}

// ToolTranscript is Transcript with each run's tool calls and their
// results in the assistant's turn, as text where they happened
// ("[tool terminal {…}]" when it started, "[tool terminal completed:
// …]" when it ended), for a runtime whose history takes only roles and
// text (Hermes' conversation_history). onlyImported reports that the
// turns are exactly an importer's history (HistoryKey) with no runhub run
// after it.
func (x *Execution) ToolTranscript(ctx context.Context) (turns []Turn, onlyImported bool, err error) {
	reg, ok := x.log.(interface {
		Session(ctx context.Context, id string) (journal.SessionMeta, error)
	})
	if !ok {
		return nil, false, errors.New("driver: the journal cannot list a session's runs")
	}
	at, onlyImported, err := sessionTranscript(ctx, x.log, reg, x.SessionID, x.RunID, true)
	return plainTurns(at), onlyImported, err
}

// maxToolText bounds the text of one tool's arguments or result in a
// ToolTranscript.
const maxToolText = 2000

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
	turns, _, err := sessionTranscript(ctx, l, reg, sessionID, before, false)
	return plainTurns(turns), err
}

func sessionTranscript(ctx context.Context, l journal.Log, reg interface {
	Session(ctx context.Context, id string) (journal.SessionMeta, error)
}, sessionID, before string, tools bool) ([]AttachedTurn, bool, error) {
	meta, err := reg.Session(ctx, sessionID)
	if err != nil {
		return nil, false, err
	}
	var turns []AttachedTurn
	imported := false // turns are an importer's history, nothing after it
	for _, rid := range meta.Runs {
		if rid == before {
			break
		}
		meta, err := l.Run(ctx, rid)
		if errors.Is(err, journal.ErrNotFound) {
			continue // trimmed by retention
		}
		if err != nil {
			return nil, false, err
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
			imported = true
			continue
		}
		imported = false
		var user string
		var answer strings.Builder
		names := map[string]string{} // tool call id → name
		var calls []ToolCall
		open := map[string]int{} // tool call id → index in calls
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
			case protocol.EventToolStarted:
				var p protocol.ToolStartedPayload
				switch {
				case json.Unmarshal(e.Payload, &p) != nil:
				case tools:
					names[p.ToolCallID] = p.Name
					toolLine(&answer, p.Name, "", p.Args)
				default:
					open[p.ToolCallID] = len(calls)
					calls = append(calls, ToolCall{ToolCallID: p.ToolCallID, Name: p.Name, Args: p.Args, At: answer.Len()})
				}
			case protocol.EventToolDone:
				var p protocol.ToolDonePayload
				switch {
				case json.Unmarshal(e.Payload, &p) != nil:
				case tools:
					toolLine(&answer, names[p.ToolCallID], " "+p.Status, p.Result)
				default:
					if i, ok := open[p.ToolCallID]; ok {
						delete(open, p.ToolCallID)
						calls[i].Done = &ToolDone{Status: p.Status, DurationMS: p.DurationMS, Error: p.Error, Result: p.Result}
					}
				}
			}
			return nil
		})
		if errors.Is(err, journal.ErrNotFound) {
			continue // trimmed by retention
		}
		if err != nil {
			return nil, false, err
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
		if len(calls) > 0 && (user != "" || answer.Len() > 0) {
			// The run's assistant turn, else its user turn (At is then 0).
			turns[len(turns)-1].ToolCalls = calls
		}
	}
	return turns, imported, nil
}

// toolLine writes one tool line of a ToolTranscript: "[tool name args]"
// for a start, "[tool name status: result]" for an end (status begins
// with a space), on a line of its own.
func toolLine(b *strings.Builder, name, status string, data json.RawMessage) {
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	b.WriteString("[tool " + cmp.Or(name, "?") + status)
	if text := compactJSON(data); text != "" && text != "null" && text != "{}" {
		if status != "" {
			b.WriteString(":")
		}
		b.WriteString(" " + protocol.Truncate(text, maxToolText))
	}
	b.WriteString("]\n")
}

// JSONText is a tool call's args or result as one line of text: a JSON
// string's own text, else the compacted JSON ("" for invalid JSON).
func JSONText(data json.RawMessage) string { return compactJSON(data) }

// compactJSON is data as one line: a JSON string's own text, else the
// compacted JSON.
func compactJSON(data json.RawMessage) string {
	var s string
	if json.Unmarshal(data, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, data) != nil {
		return ""
	}
	return buf.String()
}
