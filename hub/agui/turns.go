package agui

import (
	"encoding/json"

	"github.com/runhub/runhub/protocol"
)

// Turns maps one runhub run to the AG-UI runs of the run endpoint (POST
// /v1/agui, docs/agui.md): AG-UI has no mid-run prompt, so a run that asks
// for an approval or a clarification ends (RUN_FINISHED with the interrupt
// outcome) and the AG-UI run that answers it (RunAgentInput.resume)
// continues the same runhub run. Turn 0 is the run from its start to its
// first prompt (or its end); turn k+1 begins after the k-th prompt.
//
// Like Mapper it is a pure fold: the events of journal event N depend only
// on events 1..N, so a turn re-folded from the run's start yields the same
// events, and an SSE id "<run>:<seq>.<k>" names one event of all turns.
// RUN_STARTED and RUN_FINISHED carry the runhub run id as runId; the
// endpoint replaces it with the AG-UI run id of the turn it streams.
// The zero value is ready; use one Turns per run.
type Turns struct {
	m        Mapper
	turn     int
	tool     string // the tool call id of the running tool, for an approval's toolCallId
	toolOpen bool
}

// TurnEvent is one AG-UI event of a turn.
type TurnEvent struct {
	Turn  int
	Event Event
}

// Interrupt reasons of the interrupt outcome (open strings in AG-UI).
const (
	ReasonApproval = "tool_approval"
	ReasonClarify  = "input_required"
)

// Map returns the AG-UI events of e, the run's next journal event, each
// with its turn. A prompt (approval.requested, clarify.requested) yields
// its CUSTOM event, the ends of what is open and RUN_FINISHED with the
// interrupt outcome in the current turn, then RUN_STARTED of the next.
func (t *Turns) Map(e *protocol.Envelope) []TurnEvent {
	out := t.m.Map(e)
	switch e.Type {
	case protocol.EventToolStarted:
		var p protocol.ToolStartedPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			t.tool, t.toolOpen = p.ToolCallID, true
		}
	case protocol.EventToolDone:
		t.tool, t.toolOpen = "", false
	}
	res := make([]TurnEvent, 0, len(out)+4)
	for _, ev := range out {
		res = append(res, TurnEvent{Turn: t.turn, Event: ev})
	}
	var in map[string]any
	switch e.Type {
	case protocol.EventApprovalReq:
		var p protocol.ApprovalRequestedPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.ApprovalID == "" {
			return res
		}
		choices := nonNil(p.Choices)
		in = map[string]any{"id": p.ApprovalID, "reason": ReasonApproval, "message": p.Summary,
			"responseSchema": map[string]any{"type": "object", "required": []string{"choice"},
				"properties": map[string]any{"choice": map[string]any{"type": "string", "enum": choices}}},
			"metadata": map[string]any{"runhub": map[string]any{"kind": "approval", "run_id": e.RunID, "risk": p.Risk, "choices": choices}}}
		if t.toolOpen {
			in["toolCallId"] = ID(e.RunID, t.tool)
		}
	case protocol.EventClarifyReq:
		var p protocol.ClarifyRequestedPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.ClarifyID == "" {
			return res
		}
		choices := nonNil(p.Choices)
		resp := map[string]any{"type": "string"}
		if p.InputMode == "choice" && len(choices) > 0 {
			resp["enum"] = choices
		}
		in = map[string]any{"id": p.ClarifyID, "reason": ReasonClarify, "message": p.Question,
			"responseSchema": map[string]any{"type": "object", "required": []string{"response"},
				"properties": map[string]any{"response": resp}},
			"metadata": map[string]any{"runhub": map[string]any{"kind": "clarify", "run_id": e.RunID, "input_mode": p.InputMode, "choices": choices}}}
	default:
		return res
	}
	ts := timestamp(e.CreatedAt)
	var closing []Event
	t.m.closeAll(e.RunID, func(ev Event) { ev["timestamp"] = ts; closing = append(closing, ev) })
	for _, ev := range closing {
		res = append(res, TurnEvent{Turn: t.turn, Event: ev})
	}
	res = append(res, TurnEvent{Turn: t.turn, Event: Event{"type": RunFinished, "threadId": e.SessionID, "runId": e.RunID,
		"outcome": map[string]any{"type": "interrupt", "interrupts": []any{in}}, "timestamp": ts}})
	t.turn++
	res = append(res, TurnEvent{Turn: t.turn, Event: Event{"type": RunStarted, "threadId": e.SessionID, "runId": e.RunID, "timestamp": ts}})
	return res
}

// IsPrompt reports whether a journal event type ends a turn.
func IsPrompt(t protocol.EventType) bool {
	return t == protocol.EventApprovalReq || t == protocol.EventClarifyReq
}
