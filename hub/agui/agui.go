// Package agui maps a run's journal events to AG-UI events
// (https://docs.ag-ui.com, protocol 1.0 as published in @ag-ui/core 1.0.0):
// RUN_STARTED, TEXT_MESSAGE_*, REASONING_*, TOOL_CALL_*, STEP_*, CUSTOM,
// RUN_FINISHED and RUN_ERROR. docs/agui.md is the mapping's reference.
//
// A Mapper is a pure fold: the AG-UI events of journal event N depend only
// on events 1..N of the run, so a stream resumed at (N, k) by re-folding
// 1..N-1 yields exactly the events a first pass yielded after its k-th of N.
package agui

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/runhub/runhub/protocol"
)

// The AG-UI event types this package produces.
const (
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningEnd            = "REASONING_END"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallResult          = "TOOL_CALL_RESULT"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	Custom                  = "CUSTOM"
)

// CustomPrefix starts the name of every CUSTOM event: "runhub." followed by
// the journal event type ("runhub.approval.requested").
const CustomPrefix = "runhub."

// maxOpenSteps bounds the tool steps a mapper keeps open; a tool started
// past it gets its TOOL_CALL_* events but no step.
const maxOpenSteps = 256

// Event is one AG-UI event as a JSON object; "type" names it.
type Event map[string]any

// Type returns the event's AG-UI type.
func (e Event) Type() string { s, _ := e["type"].(string); return s }

// Mapper folds one run's journal events, in seq order, into AG-UI events.
// The zero value is ready; use one Mapper per run.
type Mapper struct {
	text, reasoning         string   // journal message_id / block_id of the open text message / reasoning span
	textOpen, reasoningOpen bool     // (an id may be "": only presence is validated)
	steps                   []string // tool_call_ids whose step is open, oldest first
	usage                   *protocol.Usage
}

// ID namespaces a journal id (message_id, block_id, tool_call_id), which is
// unique only within its run, as "<run_id>:<id>": AG-UI ids name messages
// and tool calls across a whole thread (the session).
func ID(runID, id string) string { return runID + ":" + id }

// Map returns the AG-UI events of e, the run's next journal event. It may
// return none (an empty text delta inside an open message).
func (m *Mapper) Map(e *protocol.Envelope) []Event {
	ts := timestamp(e.CreatedAt)
	var out []Event
	add := func(ev Event) {
		ev["timestamp"] = ts
		out = append(out, ev)
	}
	rid := e.RunID
	switch e.Type {
	case protocol.EventRunStarted:
		ev := Event{"type": RunStarted, "threadId": e.SessionID, "runId": rid}
		var p protocol.RunStartedPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			ev["input"] = map[string]any{"threadId": e.SessionID, "runId": rid,
				"messages": []any{map[string]any{"id": ID(rid, "user"), "role": "user", "content": p.Message}},
				"tools":    []any{}, "context": []any{}}
			ev["metadata"] = map[string]any{"runhub": map[string]any{"profile": p.Profile, "model": p.Model,
				"provider": p.Provider, "workspace": p.Workspace, "toolsets": nonNil(p.Toolsets), "source": p.Source}}
		}
		add(ev)
	case protocol.EventTokenDelta:
		var p protocol.TokenDeltaPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.custom(e, ts)
		}
		if !m.textOpen || m.text != p.MessageID {
			m.endText(rid, add)
			m.text, m.textOpen = p.MessageID, true
			add(Event{"type": TextMessageStart, "messageId": ID(rid, p.MessageID), "role": "assistant"})
		}
		if p.Text != "" {
			add(Event{"type": TextMessageContent, "messageId": ID(rid, p.MessageID), "delta": p.Text})
		}
	case protocol.EventReasoningDelta, protocol.EventReasoningDone:
		var p protocol.ReasoningPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.custom(e, ts)
		}
		if !m.reasoningOpen || m.reasoning != p.BlockID {
			m.endReasoning(rid, add)
			m.reasoning, m.reasoningOpen = p.BlockID, true
			id := ID(rid, p.BlockID)
			add(Event{"type": ReasoningStart, "messageId": id})
			add(Event{"type": ReasoningMessageStart, "messageId": id, "role": "reasoning"})
		}
		if p.Text != "" {
			add(Event{"type": ReasoningMessageContent, "messageId": ID(rid, p.BlockID), "delta": p.Text})
		}
		if e.Type == protocol.EventReasoningDone {
			m.endReasoning(rid, add)
		}
	case protocol.EventToolStarted:
		var p protocol.ToolStartedPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.custom(e, ts)
		}
		id := ID(rid, p.ToolCallID)
		start := Event{"type": ToolCallStart, "toolCallId": id, "toolCallName": p.Name}
		if m.textOpen {
			start["parentMessageId"] = ID(rid, m.text)
		}
		add(start)
		args := string(p.Args)
		if args == "" {
			args = "{}"
		}
		add(Event{"type": ToolCallArgs, "toolCallId": id, "delta": args})
		add(Event{"type": ToolCallEnd, "toolCallId": id})
		if len(m.steps) < maxOpenSteps && !slices.Contains(m.steps, p.ToolCallID) {
			m.steps = append(m.steps, p.ToolCallID)
			add(Event{"type": StepStarted, "stepName": stepName(rid, p.ToolCallID)})
		}
	case protocol.EventToolDone:
		var p protocol.ToolDonePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.custom(e, ts)
		}
		add(Event{"type": ToolCallResult, "messageId": ID(rid, p.ToolCallID) + ":result",
			"toolCallId": ID(rid, p.ToolCallID), "content": resultText(p.Result), "role": "tool",
			"metadata": map[string]any{"runhub": map[string]any{"status": p.Status, "error": p.Error, "duration_ms": p.DurationMS}}})
		if i := slices.Index(m.steps, p.ToolCallID); i >= 0 {
			m.steps = slices.Delete(m.steps, i, i+1)
			add(Event{"type": StepFinished, "stepName": stepName(rid, p.ToolCallID)})
		}
	case protocol.EventUsageUpdated, protocol.EventUsageFinal:
		var u protocol.Usage
		if json.Unmarshal(e.Payload, &u) == nil {
			m.usage = &u
		}
		return m.custom(e, ts)
	case protocol.EventDone:
		var p protocol.DonePayload
		_ = json.Unmarshal(e.Payload, &p)
		if p.Usage == nil {
			p.Usage = m.usage
		}
		m.closeAll(rid, add)
		ev := Event{"type": RunFinished, "threadId": e.SessionID, "runId": rid, "outcome": map[string]any{"type": "success"}}
		if u := p.Usage; u != nil {
			ev["usage"] = []any{map[string]any{"provider": u.Provider, "model": u.Model, "inputTokens": max(u.InputTokens, 0),
				"outputTokens": max(u.OutputTokens, 0), "totalTokens": max(u.InputTokens, 0) + max(u.OutputTokens, 0)}}
		}
		add(ev)
	case protocol.EventCancelled:
		var p protocol.CancelledPayload
		_ = json.Unmarshal(e.Payload, &p)
		m.closeAll(rid, add)
		add(Event{"type": RunFinished, "threadId": e.SessionID, "runId": rid, "outcome": map[string]any{"type": "cancelled"},
			"metadata": map[string]any{"runhub": map[string]any{"reason": p.Reason, "partial": p.Partial}}})
	case protocol.EventError:
		if !e.Terminal {
			return m.custom(e, ts)
		}
		var p protocol.ErrorPayload
		_ = json.Unmarshal(e.Payload, &p)
		m.closeAll(rid, add)
		msg := p.Message
		if msg == "" {
			msg = "the run failed"
		}
		ev := Event{"type": RunError, "message": msg}
		if p.Code != "" {
			ev["code"] = p.Code
		}
		add(ev)
	default:
		return m.custom(e, ts)
	}
	return out
}

// custom wraps a journal event AG-UI has no event for (approvals,
// clarifications, progress, tool output, title, usage, queue, goal,
// status, a non-terminal error) as CUSTOM "runhub.<type>" with the journal
// payload as its value.
func (m *Mapper) custom(e *protocol.Envelope, ts int64) []Event {
	var v any = map[string]any{}
	if len(e.Payload) > 0 {
		v = json.RawMessage(e.Payload)
	}
	return []Event{{"type": Custom, "name": CustomPrefix + string(e.Type), "value": v, "timestamp": ts}}
}

func (m *Mapper) endText(rid string, add func(Event)) {
	if m.textOpen {
		add(Event{"type": TextMessageEnd, "messageId": ID(rid, m.text)})
		m.text, m.textOpen = "", false
	}
}

func (m *Mapper) endReasoning(rid string, add func(Event)) {
	if m.reasoningOpen {
		id := ID(rid, m.reasoning)
		add(Event{"type": ReasoningMessageEnd, "messageId": id})
		add(Event{"type": ReasoningEnd, "messageId": id})
		m.reasoning, m.reasoningOpen = "", false
	}
}

// closeAll ends whatever is open before the run's last event: AG-UI refuses
// RUN_FINISHED while a message, reasoning span or step is open.
func (m *Mapper) closeAll(rid string, add func(Event)) {
	m.endReasoning(rid, add)
	m.endText(rid, add)
	for _, id := range m.steps {
		add(Event{"type": StepFinished, "stepName": stepName(rid, id)})
	}
	m.steps = m.steps[:0]
}

func stepName(rid, toolCallID string) string { return "tool " + ID(rid, toolCallID) }

// resultText is a tool result as TOOL_CALL_RESULT content: a JSON string
// as its text, anything else as its JSON.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 {
		return "null"
	}
	return string(raw)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// timestamp converts created_at (Unix seconds) to AG-UI's integer
// milliseconds.
func timestamp(sec float64) int64 {
	if sec <= 0 || math.IsNaN(sec) || sec > 1e12 {
		return 0
	}
	return int64(math.Round(sec * 1000))
}

// Position is where an AG-UI stream resumes: after the AG-UI event with
// index Index of journal event Seq of run RunID. Index -1 means after every
// AG-UI event of that journal event (a native cursor "run:seq").
type Position struct {
	RunID string
	Seq   uint64
	Index int
}

// EventID is the SSE id of the k-th AG-UI event of journal event seq:
// "<run_id>:<seq>.<k>".
func EventID(runID string, seq uint64, k int) string {
	return runID + ":" + strconv.FormatUint(seq, 10) + "." + strconv.Itoa(k)
}

// ParseEventID parses a Last-Event-ID: "<run_id>:<seq>.<k>" as EventID
// makes, or a native cursor "<run_id>:<seq>".
func ParseEventID(s string) (Position, error) {
	i := strings.LastIndexByte(s, ':')
	if i > 0 {
		if j := strings.IndexByte(s[i+1:], '.'); j >= 0 {
			num := s[i+1+j+1:]
			k, err := strconv.Atoi(num)
			if err != nil || k < 0 || num[0] == '+' || (len(num) > 1 && num[0] == '0') {
				return Position{}, protocol.Errorf(protocol.CodeBadCursor, "Last-Event-ID %q: want run_id:seq.index", protocol.Truncate(s, 80))
			}
			c, err := protocol.ParseCursor(s[:i+1+j])
			if err != nil {
				return Position{}, err
			}
			return Position{RunID: c.RunID, Seq: c.Seq, Index: k}, nil
		}
	}
	c, err := protocol.ParseCursor(s)
	if err != nil {
		return Position{}, err
	}
	return Position{RunID: c.RunID, Seq: c.Seq, Index: -1}, nil
}

// Skip reports whether the k-th AG-UI event of journal event seq lies at or
// before p (already delivered).
func (p Position) Skip(seq uint64, k int) bool {
	return seq < p.Seq || (seq == p.Seq && (p.Index < 0 || k <= p.Index))
}
