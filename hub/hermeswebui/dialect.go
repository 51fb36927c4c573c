// Package hermeswebui is hermes-webui's dialect (docs/hermes-webui.md): the
// one table that maps runhub's journal events to the legacy SSE events its
// browser relay understands (names such as token, tool, tool_complete, done,
// cancel, apperror and their payloads), the reverse mapping its importer
// uses, and the reader of a WebUI state directory.
//
// It is pure: no I/O but the state-directory reader's file reads.
package hermeswebui

import (
	"encoding/json"
	"strings"

	"github.com/runhub/runhub/protocol"
)

// Event is one event in WebUI's dialect, shaped as a row of WebUI's own run
// journal: the relay takes its name from Event (or Type), its data from
// Payload and its SSE id from EventID. A trailer the dialect adds after a
// terminal event (stream_end) has no EventID and no Seq, so it never moves
// a cursor.
type Event struct {
	Version       int             `json:"version"`
	EventID       string          `json:"event_id,omitempty"`
	Seq           uint64          `json:"seq,omitempty"`
	RunID         string          `json:"run_id"`
	SessionID     string          `json:"session_id"`
	Event         string          `json:"event"`
	Type          string          `json:"type"`
	CreatedAt     float64         `json:"created_at"`
	Terminal      bool            `json:"terminal"`
	TerminalState *string         `json:"terminal_state"`
	Payload       json.RawMessage `json:"payload"`
}

// WebUI's terminal states (its run journal's terminal_state).
const (
	StateCompleted         = "completed"
	StateInterruptedByUser = "interrupted-by-user"
	StateInterruptedCrash  = "interrupted-by-crash"
	StateErrored           = "errored"
)

// Original is the key under which an imported event's payload keeps the
// WebUI event it was made from ({"event": name, "payload": data}); the
// dialect gives such an event back exactly as WebUI journaled it.
const Original = "webui"

// original is the value under Original.
type original struct {
	Event     string          `json:"event"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt float64         `json:"created_at"`
}

// TerminalState is WebUI's terminal_state of a row with this event name and
// payload, or "" for a row that does not end a run. The settled outcome of
// a run is its last terminal row that is not stream_end.
func TerminalState(name string, payload json.RawMessage) string {
	switch name {
	case "done", "stream_end":
		return StateCompleted
	case "cancel":
		return StateInterruptedByUser
	case "apperror", "error":
		var p struct {
			Type string `json:"type"`
		}
		json.Unmarshal(payload, &p)
		switch p.Type {
		case "cancelled":
			return StateInterruptedByUser
		case "interrupted":
			return StateInterruptedCrash
		case "tool_limit_reached":
			return "tool_limit_reached"
		}
		return StateErrored
	}
	return ""
}

// ClosesRelay reports whether WebUI's relay stops after an event of this
// name (its close set: stream_end, cancel, apperror, error).
func ClosesRelay(name string) bool {
	switch name {
	case "stream_end", "cancel", "apperror", "error":
		return true
	}
	return false
}

// ErrorType is the apperror type WebUI knows for a runhub error code.
func ErrorType(code string) string {
	switch code {
	case protocol.ErrorInterrupted:
		return "interrupted"
	case protocol.ErrorTimeout, protocol.ErrorNoRunner:
		return "no_response"
	case protocol.ErrorProviderError:
		return "provider_error"
	case "":
		return "error"
	}
	return code
}

// Mapper maps one run's runhub events to WebUI events in order. It keeps
// what a later event needs of an earlier one (a tool's name and arguments
// for its tool_complete, the run's usage for done); feed it the run's
// earlier events with Note when mapping starts mid-run.
type Mapper struct {
	// Session, when set, is done's payload.session: WebUI's browser renders
	// the finished transcript from it. Nil: {"session_id": …} only.
	Session func(sessionID string) any

	tools map[string]tool
	usage *protocol.Usage
}

type tool struct {
	name string
	args json.RawMessage
}

// Note records what e tells later events without mapping it.
func (m *Mapper) Note(e *protocol.Envelope) {
	switch e.Type {
	case protocol.EventToolStarted:
		p, err := protocol.DecodePayload[protocol.ToolStartedPayload](e)
		if err != nil {
			return
		}
		if m.tools == nil {
			m.tools = map[string]tool{}
		}
		if len(m.tools) < maxTools {
			m.tools[p.ToolCallID] = tool{name: p.Name, args: p.Args}
		}
	case protocol.EventUsageFinal, protocol.EventUsageUpdated:
		if u, err := protocol.DecodePayload[protocol.Usage](e); err == nil {
			m.usage = &u
		}
	}
}

// maxTools bounds the tools a Mapper remembers (a run with more maps the
// rest without their names).
const maxTools = 10000

// NeedsHistory reports whether mapping e needs what an earlier event told
// (a tool.done whose tool.started the Mapper has not seen).
func (m *Mapper) NeedsHistory(e *protocol.Envelope) bool {
	if e.Type != protocol.EventToolDone {
		return false
	}
	p, err := protocol.DecodePayload[protocol.ToolDonePayload](e)
	if err != nil {
		return false
	}
	_, ok := m.tools[p.ToolCallID]
	return !ok
}

// Map returns the WebUI events of e (none for an event WebUI has no name
// for; see the table in docs/hermes-webui.md).
func (m *Mapper) Map(e *protocol.Envelope) []Event {
	if ev, ok := m.imported(e); ok {
		m.Note(e)
		return ev
	}
	m.Note(e)
	var name string
	var payload any
	sid := e.SessionID
	switch e.Type {
	case protocol.EventTokenDelta:
		p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](e)
		name, payload = "token", map[string]any{"text": p.Text}
	case protocol.EventReasoningDelta:
		p, _ := protocol.DecodePayload[protocol.ReasoningPayload](e)
		name, payload = "reasoning", map[string]any{"text": p.Text}
	case protocol.EventProgress:
		p, _ := protocol.DecodePayload[protocol.ProgressPayload](e)
		if p.Steer == "" {
			return nil
		}
		name, payload = "steer_delivered", map[string]any{"session_id": sid, "text": p.Steer}
	case protocol.EventToolStarted:
		p, _ := protocol.DecodePayload[protocol.ToolStartedPayload](e)
		name, payload = "tool", map[string]any{"event_type": "tool.started", "name": p.Name,
			"preview": preview(p.Args), "args": argsObject(p.Args), "tid": p.ToolCallID}
	case protocol.EventToolDone:
		p, _ := protocol.DecodePayload[protocol.ToolDonePayload](e)
		t := m.tools[p.ToolCallID]
		name, payload = "tool_complete", map[string]any{"event_type": "tool.completed", "name": t.name,
			"preview": preview(p.Result), "args": argsObject(t.args), "tid": p.ToolCallID,
			"duration": float64(p.DurationMS) / 1000, "is_error": p.Error}
	case protocol.EventApprovalReq:
		p, _ := protocol.DecodePayload[protocol.ApprovalRequestedPayload](e)
		name, payload = "approval", map[string]any{"approval_id": p.ApprovalID, "command": p.Summary,
			"description": p.Summary, "pattern_key": "", "pattern_keys": []string{}, "pending_count": 1,
			"run_id": e.RunID, "session_id": sid, "risk": p.Risk, "choices": nonNil(p.Choices)}
	case protocol.EventClarifyReq:
		p, _ := protocol.DecodePayload[protocol.ClarifyRequestedPayload](e)
		name, payload = "clarify", map[string]any{"clarify_id": p.ClarifyID, "question": p.Question,
			"choices_offered": nonNil(p.Choices), "session_id": sid, "kind": "clarify",
			"requested_at": e.CreatedAt, "timeout_seconds": 0}
	case protocol.EventTitleUpdated:
		p, _ := protocol.DecodePayload[protocol.TitleUpdatedPayload](e)
		name, payload = "title", map[string]any{"session_id": sid, "title": p.Title}
	case protocol.EventUsageUpdated:
		p, _ := protocol.DecodePayload[protocol.Usage](e)
		name, payload = "metering", map[string]any{"tps": 0, "tps_available": false, "estimated": false,
			"high": 0, "low": 0, "active": true, "session_id": sid,
			"usage": map[string]any{"input_tokens": p.InputTokens, "output_tokens": p.OutputTokens}}
	case protocol.EventGoalUpdated:
		p, _ := protocol.DecodePayload[protocol.GoalUpdatedPayload](e)
		name, payload = "goal", map[string]any{"session_id": sid, "state": p.State, "message": p.Text,
			"message_key": "", "message_args": map[string]any{}}
	case protocol.EventDone:
		p, _ := protocol.DecodePayload[protocol.DonePayload](e)
		u := p.Usage
		if u == nil {
			u = m.usage
		}
		if u == nil {
			u = &protocol.Usage{}
		}
		var sess any = map[string]any{"session_id": sid}
		if m.Session != nil {
			sess = m.Session(sid)
		}
		name, payload = "done", map[string]any{"session": sess, "usage": map[string]any{
			"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "estimated_cost": nil,
			"cache_read_tokens": 0, "cache_write_tokens": 0, "duration_seconds": float64(u.DurationMS) / 1000},
			"terminal_state": StateCompleted}
	case protocol.EventCancelled:
		p, _ := protocol.DecodePayload[protocol.CancelledPayload](e)
		msg := "Cancelled"
		if p.Reason != "" {
			msg = "Cancelled: " + p.Reason
		}
		name, payload = "cancel", map[string]any{"message": msg, "type": "cancelled", "status": "cancelled", "session_id": sid}
	case protocol.EventError:
		p, _ := protocol.DecodePayload[protocol.ErrorPayload](e)
		if !e.Terminal {
			name, payload = "warning", map[string]any{"type": ErrorType(p.Code), "message": p.Message}
			break
		}
		body := map[string]any{"message": p.Message, "type": ErrorType(p.Code), "details": p.Code, "session_id": sid, "stream_id": e.RunID}
		if p.Code == protocol.ErrorInterrupted {
			body["recovery_control"] = true
			body["hint"] = "The run's executor stopped; reload the session."
			body["journal_last_seq"] = p.LastSeq
		}
		name, payload = "apperror", body
	default:
		// run.started, status, reasoning.done, tool.updated,
		// approval.resolved, clarify.resolved, usage.final, queue.updated:
		// WebUI's stream has no event for them.
		return nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil
	}
	out := []Event{m.event(e, name, raw)}
	if e.Type == protocol.EventDone {
		out = append(out, Trailer(e.RunID, sid, e.CreatedAt))
	}
	return out
}

// Trailer is the stream_end WebUI sends after done: a transport fence
// without an id.
func Trailer(runID, sessionID string, at float64) Event {
	raw, _ := json.Marshal(map[string]any{"session_id": sessionID})
	return Event{Version: 1, RunID: runID, SessionID: sessionID, Event: "stream_end", Type: "stream_end",
		CreatedAt: at, Terminal: true, TerminalState: ptr(StateCompleted), Payload: raw}
}

// imported gives back the WebUI event an imported event was made from.
func (m *Mapper) imported(e *protocol.Envelope) ([]Event, bool) {
	if !strings.Contains(string(e.Payload), `"`+Original+`"`) {
		return nil, false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(e.Payload, &p) != nil || p[Original] == nil {
		return nil, false
	}
	var o original
	if json.Unmarshal(p[Original], &o) != nil || o.Event == "" {
		return nil, false
	}
	if len(o.Payload) == 0 {
		o.Payload = json.RawMessage(`{}`)
	}
	ev := m.event(e, o.Event, o.Payload)
	if o.CreatedAt > 0 {
		ev.CreatedAt = o.CreatedAt
	}
	return []Event{ev}, true
}

func (m *Mapper) event(e *protocol.Envelope, name string, payload json.RawMessage) Event {
	ev := Event{Version: 1, EventID: e.EventID, Seq: e.Seq, RunID: e.RunID, SessionID: e.SessionID,
		Event: name, Type: name, CreatedAt: e.CreatedAt, Payload: payload}
	if ts := TerminalState(name, payload); ts != "" {
		ev.Terminal, ev.TerminalState = true, ptr(ts)
	}
	return ev
}

func ptr(s string) *string { return &s }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// argsObject is a tool's arguments as WebUI shows them: the JSON object, or
// {} for anything else.
func argsObject(raw json.RawMessage) any {
	var v map[string]any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return map[string]any{}
	}
	return v
}

// preview is a short one-line text of a JSON value (a string as itself).
func preview(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return protocol.Truncate(s, maxPreview)
	}
	return protocol.Truncate(strings.TrimSpace(string(raw)), maxPreview)
}

// maxPreview bounds a tool preview, as WebUI bounds its snippets.
const maxPreview = 200
