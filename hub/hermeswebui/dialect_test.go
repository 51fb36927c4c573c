package hermeswebui_test

import (
	"encoding/json"
	"testing"

	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/protocol"
)

func ev(t *testing.T, typ protocol.EventType, seq uint64, p any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent("r_1", "s_1", typ, p)
	if err != nil {
		t.Fatal(err)
	}
	e.Seq, e.EventID, e.CreatedAt = seq, protocol.EventID("r_1", seq), 1786000000+float64(seq)
	return e
}

// The table's rows that the end-to-end tests do not reach: errors by code,
// a non-terminal error, a steer, a goal, usage, and the events WebUI has no
// name for.
func TestDialectTable(t *testing.T) {
	cases := []struct {
		e     protocol.Envelope
		name  string
		check func(map[string]any) bool
	}{
		{ev(t, protocol.EventError, 9, protocol.ErrorPayload{Code: protocol.ErrorInterrupted, Message: "gone", Terminal: true, LastSeq: 8}), "apperror",
			func(p map[string]any) bool {
				return p["type"] == "interrupted" && p["recovery_control"] == true && p["journal_last_seq"] == 8.0
			}},
		{ev(t, protocol.EventError, 9, protocol.ErrorPayload{Code: protocol.ErrorTimeout, Message: "slow", Terminal: true}), "apperror",
			func(p map[string]any) bool { return p["type"] == "no_response" && p["details"] == "timeout" }},
		{ev(t, protocol.EventError, 9, protocol.ErrorPayload{Code: "rate_limited", Message: "429", Terminal: false}), "warning",
			func(p map[string]any) bool { return p["type"] == "rate_limited" && p["message"] == "429" }},
		{ev(t, protocol.EventProgress, 3, protocol.ProgressPayload{Text: "x", Steer: "also docs"}), "steer_delivered",
			func(p map[string]any) bool { return p["text"] == "also docs" }},
		{ev(t, protocol.EventGoalUpdated, 3, protocol.GoalUpdatedPayload{State: "paused", Text: "ship"}), "goal",
			func(p map[string]any) bool { return p["state"] == "paused" && p["message"] == "ship" }},
		{ev(t, protocol.EventUsageUpdated, 3, protocol.Usage{InputTokens: 5, OutputTokens: 7}), "metering",
			func(p map[string]any) bool { return p["usage"].(map[string]any)["output_tokens"] == 7.0 }},
		{ev(t, protocol.EventCancelled, 4, protocol.CancelledPayload{Reason: "user"}), "cancel",
			func(p map[string]any) bool { return p["type"] == "cancelled" && p["status"] == "cancelled" }},
	}
	for _, c := range cases {
		m := &hermeswebui.Mapper{}
		out := m.Map(&c.e)
		if len(out) != 1 || out[0].Event != c.name || out[0].Type != c.name || out[0].EventID != c.e.EventID || out[0].Seq != c.e.Seq {
			t.Fatalf("%s: %+v", c.e.Type, out)
		}
		var p map[string]any
		json.Unmarshal(out[0].Payload, &p)
		if !c.check(p) {
			t.Fatalf("%s → %s: payload %s", c.e.Type, c.name, out[0].Payload)
		}
		if out[0].Terminal != c.e.Terminal || (c.e.Terminal) != (out[0].TerminalState != nil) {
			t.Fatalf("%s: terminal %v state %v", c.e.Type, out[0].Terminal, out[0].TerminalState)
		}
	}
	for _, typ := range []protocol.EventType{protocol.EventStatus, protocol.EventReasoningDone, protocol.EventQueueUpdated, protocol.EventUsageFinal} {
		var p any = map[string]any{}
		switch typ {
		case protocol.EventStatus:
			p = protocol.StatusPayload{Status: protocol.StatusRunning, Controls: []string{}}
		case protocol.EventReasoningDone:
			p = protocol.ReasoningPayload{BlockID: "b"}
		case protocol.EventQueueUpdated:
			p = protocol.QueueUpdatedPayload{Items: []protocol.QueueItem{}}
		case protocol.EventUsageFinal:
			p = protocol.Usage{}
		}
		e := ev(t, typ, 2, p)
		if out := (&hermeswebui.Mapper{}).Map(&e); len(out) != 0 {
			t.Fatalf("%s maps to %v", typ, out)
		}
	}
	// A tool's end names the tool the Mapper saw start (Note, for a poll
	// that starts after it).
	start := ev(t, protocol.EventToolStarted, 2, protocol.ToolStartedPayload{ToolCallID: "t1", Name: "grep", Args: json.RawMessage(`{"q":"x"}`)})
	done := ev(t, protocol.EventToolDone, 3, protocol.ToolDonePayload{ToolCallID: "t1", Status: "ok", DurationMS: 1500, Result: json.RawMessage(`"found"`)})
	m := &hermeswebui.Mapper{}
	if !m.NeedsHistory(&done) {
		t.Fatal("a tool end without its start needs no history")
	}
	m.Note(&start)
	out := m.Map(&done)
	var p map[string]any
	json.Unmarshal(out[0].Payload, &p)
	if p["name"] != "grep" || p["preview"] != "found" || p["duration"] != 1.5 || p["args"].(map[string]any)["q"] != "x" {
		t.Fatalf("tool_complete %s", out[0].Payload)
	}
}
