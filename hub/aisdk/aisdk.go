// Package aisdk maps a run's journal events to the UI message stream of
// the Vercel AI SDK (npm "ai" 7.x: the chunks its uiMessageChunkSchema
// accepts and readUIMessageStream / useChat assemble into one assistant
// message). docs/integrations.md is the mapping's reference.
//
// A Mapper is a pure fold: the chunks of journal event N depend only on
// events 1..N of the run, so the k-th chunk of a run is the same on every
// pass. That index is a chunk's sequence on the WebSocket transport, and
// a stream resumed after sequence n re-folds the run and sends what
// follows n.
package aisdk

import (
	"encoding/json"

	"github.com/runhub/runhub/protocol"
)

// Chunk is one UI message chunk as a JSON object; "type" names it.
type Chunk map[string]any

// Type returns the chunk's type.
func (c Chunk) Type() string { s, _ := c["type"].(string); return s }

// The data part types runhub adds to the assistant message (the AI SDK's
// "data-*" chunks): prompts are kept in the message (upserted by id), every
// other runhub event is transient (for useChat's onData).
const (
	DataApproval = "data-runhub-approval"
	DataClarify  = "data-runhub-clarify"
	DataEvent    = "data-runhub-event"
)

// Mapper folds one run's journal events, in seq order, into UI message
// chunks. The zero value is ready; use one Mapper per run.
type Mapper struct {
	text, reasoning         string
	textOpen, reasoningOpen bool
	usage                   *protocol.Usage
	tools                   map[string]bool // tool calls with an invocation (at most maxTools)
}

// maxTools bounds the tool call ids a Mapper remembers; the output of a
// tool it does not know gets an invocation made for it first.
const maxTools = 4096

// Map returns the chunks of e, the run's next journal event.
func (m *Mapper) Map(e *protocol.Envelope) []Chunk {
	var out []Chunk
	add := func(c Chunk) { out = append(out, c) }
	switch e.Type {
	case protocol.EventRunStarted:
		var p protocol.RunStartedPayload
		_ = json.Unmarshal(e.Payload, &p)
		add(Chunk{"type": "start", "messageId": e.RunID, "messageMetadata": map[string]any{"runhub": map[string]any{
			"run_id": e.RunID, "session_id": e.SessionID, "profile": p.Profile, "model": p.Model, "provider": p.Provider}}})
		add(Chunk{"type": "start-step"})
	case protocol.EventTokenDelta:
		var p protocol.TokenDeltaPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.data(e)
		}
		if !m.textOpen || m.text != p.MessageID {
			m.endText(add)
			m.text, m.textOpen = p.MessageID, true
			add(Chunk{"type": "text-start", "id": p.MessageID})
		}
		if p.Text != "" {
			add(Chunk{"type": "text-delta", "id": p.MessageID, "delta": p.Text})
		}
	case protocol.EventReasoningDelta, protocol.EventReasoningDone:
		var p protocol.ReasoningPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.data(e)
		}
		if !m.reasoningOpen || m.reasoning != p.BlockID {
			m.endReasoning(add)
			m.reasoning, m.reasoningOpen = p.BlockID, true
			add(Chunk{"type": "reasoning-start", "id": p.BlockID})
		}
		if p.Text != "" {
			add(Chunk{"type": "reasoning-delta", "id": p.BlockID, "delta": p.Text})
		}
		if e.Type == protocol.EventReasoningDone {
			m.endReasoning(add)
		}
	case protocol.EventToolStarted:
		var p protocol.ToolStartedPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.data(e)
		}
		var input any = map[string]any{}
		if len(p.Args) > 0 {
			_ = json.Unmarshal(p.Args, &input)
		}
		if m.tools == nil {
			m.tools = map[string]bool{}
		}
		if len(m.tools) < maxTools {
			m.tools[p.ToolCallID] = true
		}
		add(Chunk{"type": "tool-input-start", "toolCallId": p.ToolCallID, "toolName": p.Name, "dynamic": true})
		add(Chunk{"type": "tool-input-available", "toolCallId": p.ToolCallID, "toolName": p.Name, "input": input, "dynamic": true})
	case protocol.EventToolDone:
		var p protocol.ToolDonePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return m.data(e)
		}
		if !m.tools[p.ToolCallID] {
			// An output without a start (the AI SDK refuses it): the tool
			// gets an invocation of unknown name and input first.
			add(Chunk{"type": "tool-input-available", "toolCallId": p.ToolCallID, "toolName": "unknown", "input": map[string]any{}, "dynamic": true})
		}
		if p.Error {
			msg := "the tool failed"
			var str string
			if json.Unmarshal(p.Result, &str) == nil && str != "" {
				msg = str
			} else if len(p.Result) > 0 && string(p.Result) != "null" {
				msg = string(p.Result)
			}
			add(Chunk{"type": "tool-output-error", "toolCallId": p.ToolCallID, "errorText": msg, "dynamic": true})
		} else {
			var output any
			if len(p.Result) > 0 {
				_ = json.Unmarshal(p.Result, &output)
			}
			add(Chunk{"type": "tool-output-available", "toolCallId": p.ToolCallID, "output": output, "dynamic": true})
		}
	case protocol.EventApprovalReq, protocol.EventApprovalRes, protocol.EventClarifyReq, protocol.EventClarifyRes:
		var p struct {
			ApprovalID string `json:"approval_id"`
			ClarifyID  string `json:"clarify_id"`
		}
		var v map[string]any
		if json.Unmarshal(e.Payload, &p) != nil || json.Unmarshal(e.Payload, &v) != nil || v == nil {
			return m.data(e)
		}
		typ, id := DataApproval, p.ApprovalID
		if p.ClarifyID != "" || e.Type == protocol.EventClarifyReq || e.Type == protocol.EventClarifyRes {
			typ, id = DataClarify, p.ClarifyID
		}
		if e.Type == protocol.EventApprovalReq || e.Type == protocol.EventClarifyReq {
			v["status"] = "pending"
		}
		v["run_id"] = e.RunID
		add(Chunk{"type": typ, "id": id, "data": v})
	case protocol.EventUsageUpdated, protocol.EventUsageFinal:
		var u protocol.Usage
		if json.Unmarshal(e.Payload, &u) == nil {
			m.usage = &u
		}
		return m.data(e)
	case protocol.EventDone:
		var p protocol.DonePayload
		_ = json.Unmarshal(e.Payload, &p)
		if p.Usage == nil {
			p.Usage = m.usage
		}
		m.closeAll(add)
		add(Chunk{"type": "finish-step"})
		fin := Chunk{"type": "finish", "finishReason": "stop"}
		if u := p.Usage; u != nil {
			fin["messageMetadata"] = map[string]any{"runhub": map[string]any{"usage": u}}
		}
		add(fin)
	case protocol.EventCancelled:
		var p protocol.CancelledPayload
		_ = json.Unmarshal(e.Payload, &p)
		m.closeAll(add)
		add(Chunk{"type": "finish-step"})
		reason := p.Reason
		if reason == "" {
			reason = "cancelled"
		}
		add(Chunk{"type": "abort", "reason": reason})
		add(Chunk{"type": "finish", "finishReason": "other"})
	case protocol.EventError:
		if !e.Terminal {
			return m.data(e)
		}
		var p protocol.ErrorPayload
		_ = json.Unmarshal(e.Payload, &p)
		m.closeAll(add)
		msg := p.Message
		if msg == "" {
			msg = "the run failed"
		}
		add(Chunk{"type": "error", "errorText": msg})
		add(Chunk{"type": "finish", "finishReason": "error"})
	default:
		return m.data(e)
	}
	return out
}

// data wraps a journal event the UI message has no part for (progress,
// title, usage, status, queue, goal, tool output, a non-terminal error) as
// a transient data chunk {type, payload}.
func (m *Mapper) data(e *protocol.Envelope) []Chunk {
	var v any = map[string]any{}
	if len(e.Payload) > 0 {
		v = json.RawMessage(e.Payload)
	}
	return []Chunk{{"type": DataEvent, "data": map[string]any{"type": string(e.Type), "payload": v}, "transient": true}}
}

func (m *Mapper) endText(add func(Chunk)) {
	if m.textOpen {
		add(Chunk{"type": "text-end", "id": m.text})
		m.text, m.textOpen = "", false
	}
}

func (m *Mapper) endReasoning(add func(Chunk)) {
	if m.reasoningOpen {
		add(Chunk{"type": "reasoning-end", "id": m.reasoning})
		m.reasoning, m.reasoningOpen = "", false
	}
}

func (m *Mapper) closeAll(add func(Chunk)) {
	m.endReasoning(add)
	m.endText(add)
}
