package protocol_test

import (
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// minimum holds, per event type, a payload with exactly the minimum fields
// of protocol.md §1 (tool.updated: with text; its text-or-data rule is
// tested apart).
var minimum = map[protocol.EventType]map[string]any{
	protocol.EventRunStarted: {"message": "hi", "profile": "default", "model": "m", "provider": "p",
		"workspace": "/w", "toolsets": []string{"web"}, "source": "user"},
	protocol.EventStatus:         {"status": "running", "controls": []string{"cancel"}},
	protocol.EventTokenDelta:     {"message_id": "m1", "text": "Hel"},
	protocol.EventReasoningDelta: {"block_id": "b1", "text": "hmm"},
	protocol.EventReasoningDone:  {"block_id": "b1", "text": "hmm."},
	protocol.EventProgress:       {"text": "reading files"},
	protocol.EventToolStarted:    {"tool_call_id": "t1", "name": "shell", "args": map[string]any{"cmd": "ls"}},
	protocol.EventToolUpdated:    {"tool_call_id": "t1", "stream": "stdout", "text": "a.txt\n"},
	protocol.EventToolDone: {"tool_call_id": "t1", "status": "ok", "duration_ms": 12, "error": false,
		"result": "a.txt"},
	protocol.EventApprovalReq: {"approval_id": "a1", "summary": "rm -rf build", "risk": "high",
		"choices": []string{"once", "session", "always", "deny"}},
	protocol.EventApprovalRes:  {"approval_id": "a1", "choice": "once", "status": "resolved"},
	protocol.EventClarifyReq:   {"clarify_id": "q1", "question": "Which?", "choices": []string{"a", "b"}, "input_mode": "choice"},
	protocol.EventClarifyRes:   {"clarify_id": "q1", "status": "resolved"},
	protocol.EventTitleUpdated: {"title": "Fix the build", "source": "model"},
	protocol.EventUsageUpdated: {"input_tokens": 10, "output_tokens": 5, "model": "m", "provider": "p", "duration_ms": 100},
	protocol.EventUsageFinal:   {"input_tokens": 10, "output_tokens": 9, "model": "m", "provider": "p", "duration_ms": 900},
	protocol.EventQueueUpdated: {"depth": 1, "items": []map[string]string{{"id": "q1", "preview": "next"}}},
	protocol.EventGoalUpdated:  {"state": "active", "text": "ship it"},
	protocol.EventDone: {"status": "completed", "usage": map[string]any{"input_tokens": 10, "output_tokens": 9,
		"model": "m", "provider": "p", "duration_ms": 900}},
	protocol.EventCancelled: {"reason": "user", "partial": true},
	protocol.EventError:     {"code": "provider_error", "message": "upstream 502", "terminal": true},
}

// terminalByType is the terminal column of protocol.md §1 for the minimum
// payloads above.
var terminalByType = map[protocol.EventType]bool{
	protocol.EventDone: true, protocol.EventCancelled: true, protocol.EventError: true,
}

func event(t *testing.T, typ protocol.EventType, payload any) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent("r1", "s1", typ, payload)
	if err != nil {
		t.Fatalf("NewEvent(%s): %v", typ, err)
	}
	return e
}

func TestEventTypes(t *testing.T) {
	want := []protocol.EventType{"run.started", "status", "token.delta", "reasoning.delta", "reasoning.done",
		"progress", "tool.started", "tool.updated", "tool.done", "approval.requested", "approval.resolved",
		"clarify.requested", "clarify.resolved", "title.updated", "usage.updated", "usage.final",
		"queue.updated", "goal.updated", "done", "cancelled", "error"}
	got := protocol.EventTypes()
	if !slices.Equal(got, want) {
		t.Errorf("EventTypes() = %v\nwant (protocol.md) %v", got, want)
	}
	got[0] = "mutated"
	if protocol.EventTypes()[0] != "run.started" {
		t.Errorf("EventTypes returns shared state")
	}
	for _, typ := range want {
		if !typ.Known() {
			t.Errorf("%s not Known", typ)
		}
		if _, ok := minimum[typ]; !ok {
			t.Errorf("test table lacks %s", typ)
		}
	}
	for _, typ := range []protocol.EventType{"", "Done", "token", "tool", "run.finished"} {
		if typ.Known() {
			t.Errorf("%q Known", typ)
		}
	}
	deltas := []protocol.EventType{protocol.EventTokenDelta, protocol.EventReasoningDelta, protocol.EventToolUpdated}
	for _, typ := range want {
		if typ.IsDelta() != slices.Contains(deltas, typ) {
			t.Errorf("%s.IsDelta() = %v", typ, typ.IsDelta())
		}
	}
}

func TestStatuses(t *testing.T) {
	want := []protocol.Status{"queued", "running", "awaiting_approval", "awaiting_clarify", "paused",
		"cancelling", "cancelled", "failed", "completed", "expired", "interrupted"}
	if got := protocol.Statuses(); !slices.Equal(got, want) {
		t.Errorf("Statuses() = %v\nwant (protocol.md) %v", got, want)
	}
	terminal := map[protocol.Status]bool{"cancelled": true, "failed": true, "completed": true, "expired": true, "interrupted": true}
	for _, s := range want {
		if !s.Known() {
			t.Errorf("%s not Known", s)
		}
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
	for _, s := range []protocol.Status{"", "done", "Running", "error"} {
		if s.Known() || s.Terminal() {
			t.Errorf("%q: Known %v Terminal %v", s, s.Known(), s.Terminal())
		}
	}
}

func TestValidateEvent_MinimumPayloads(t *testing.T) {
	for typ, payload := range minimum {
		t.Run(string(typ), func(t *testing.T) {
			e := event(t, typ, payload)
			if e.Terminal != terminalByType[typ] {
				t.Errorf("NewEvent: Terminal = %v, want %v", e.Terminal, terminalByType[typ])
			}
			if err := protocol.ValidateEvent(&e); err != nil {
				t.Fatalf("ValidateEvent(minimum payload): %v", err)
			}
			for field := range payload {
				if typ == protocol.EventToolUpdated && field == "text" {
					continue // text or data; see TestValidateEvent_ToolUpdatedTextOrData
				}
				p := maps.Clone(payload)
				delete(p, field)
				e := event(t, typ, p)
				if typ == protocol.EventError && field == "terminal" {
					e.Terminal = true // a payload without terminal is terminal
				}
				wantError(t, protocol.ValidateEvent(&e), protocol.CodeInvalidPayload, "payload."+field)
			}
		})
	}
}

func TestValidateEvent_ToolUpdatedTextOrData(t *testing.T) {
	for _, p := range []map[string]any{
		{"tool_call_id": "t1", "stream": "stdout", "text": "x"},
		{"tool_call_id": "t1", "stream": "stderr", "text": "x"},
		{"tool_call_id": "t1", "stream": "data", "data": map[string]int{"rows": 3}},
		{"tool_call_id": "t1", "stream": "data", "data": []int{1}, "text": "x"},
	} {
		e := event(t, protocol.EventToolUpdated, p)
		if err := protocol.ValidateEvent(&e); err != nil {
			t.Errorf("%v: %v", p, err)
		}
	}
	e := event(t, protocol.EventToolUpdated, map[string]any{"tool_call_id": "t1", "stream": "stdout"})
	wantError(t, protocol.ValidateEvent(&e), protocol.CodeInvalidPayload, "payload.text")
}

// Every typed payload of the package, marshalled by NewEvent, passes
// ValidateEvent: the structs and the minimum field list agree.
func TestValidateEvent_TypedPayloads(t *testing.T) {
	usage := &protocol.Usage{InputTokens: 1, OutputTokens: 2, Model: "m", Provider: "p", DurationMS: 3}
	payloads := map[protocol.EventType]any{
		protocol.EventRunStarted:     protocol.RunStartedPayload{Message: "m", Toolsets: []string{}},
		protocol.EventStatus:         protocol.StatusPayload{Status: protocol.StatusRunning, Controls: []string{"cancel"}},
		protocol.EventTokenDelta:     protocol.TokenDeltaPayload{MessageID: "m1", Text: "x"},
		protocol.EventReasoningDelta: protocol.ReasoningPayload{BlockID: "b", Text: "x"},
		protocol.EventReasoningDone:  protocol.ReasoningPayload{BlockID: "b", Text: "x"},
		protocol.EventProgress:       protocol.ProgressPayload{Text: "x"},
		protocol.EventToolStarted:    protocol.ToolStartedPayload{ToolCallID: "t", Name: "n", Args: json.RawMessage(`{}`)},
		protocol.EventToolUpdated:    protocol.ToolUpdatedPayload{ToolCallID: "t", Stream: "stdout", Text: "x"},
		protocol.EventToolDone:       protocol.ToolDonePayload{ToolCallID: "t", Status: "ok", Result: json.RawMessage(`"r"`)},
		protocol.EventApprovalReq:    protocol.ApprovalRequestedPayload{ApprovalID: "a", Summary: "s", Risk: "low", Choices: []string{"once"}},
		protocol.EventApprovalRes:    protocol.ApprovalResolvedPayload{ApprovalID: "a", Choice: "once", Status: "resolved"},
		protocol.EventClarifyReq:     protocol.ClarifyRequestedPayload{ClarifyID: "q", Question: "?", Choices: []string{}, InputMode: "text"},
		protocol.EventClarifyRes:     protocol.ClarifyResolvedPayload{ClarifyID: "q", Status: "resolved"},
		protocol.EventTitleUpdated:   protocol.TitleUpdatedPayload{Title: "t", Source: "model"},
		protocol.EventUsageUpdated:   *usage,
		protocol.EventUsageFinal:     *usage,
		protocol.EventQueueUpdated:   protocol.QueueUpdatedPayload{Depth: 0, Items: []protocol.QueueItem{}},
		protocol.EventGoalUpdated:    protocol.GoalUpdatedPayload{State: protocol.GoalActive, Text: "g"},
		protocol.EventDone:           protocol.DonePayload{Status: "completed", Usage: usage},
		protocol.EventCancelled:      protocol.CancelledPayload{Reason: "user"},
		protocol.EventError:          protocol.ErrorPayload{Code: protocol.ErrorTimeout, Message: "slow", Terminal: true},
	}
	for _, typ := range protocol.EventTypes() {
		p, ok := payloads[typ]
		if !ok {
			t.Errorf("no typed payload for %s", typ)
			continue
		}
		e := event(t, typ, p)
		if err := protocol.ValidateEvent(&e); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

func TestValidateEvent_Rejects(t *testing.T) {
	valid := func(t *testing.T) protocol.Envelope {
		return event(t, protocol.EventTokenDelta, minimum[protocol.EventTokenDelta])
	}
	tests := []struct {
		name   string
		mutate func(*protocol.Envelope)
		code   protocol.Code
		field  string
	}{
		{"unknown type", func(e *protocol.Envelope) { e.Type = "token.deleted" }, protocol.CodeBadRequest, "type"},
		{"empty type", func(e *protocol.Envelope) { e.Type = "" }, protocol.CodeBadRequest, "type"},
		{"no run_id", func(e *protocol.Envelope) { e.RunID = "" }, protocol.CodeBadRequest, "run_id"},
		{"bad run_id", func(e *protocol.Envelope) { e.RunID = "r:1" }, protocol.CodeBadRequest, "run_id"},
		{"run_id oversized", func(e *protocol.Envelope) { e.RunID = strings.Repeat("r", protocol.MaxIDLen+1) }, protocol.CodeTooLarge, "run_id"},
		{"no session_id", func(e *protocol.Envelope) { e.SessionID = "" }, protocol.CodeBadRequest, "session_id"},
		{"bad session_id", func(e *protocol.Envelope) { e.SessionID = "s 1" }, protocol.CodeBadRequest, "session_id"},
		{"payload missing", func(e *protocol.Envelope) { e.Payload = nil }, protocol.CodeInvalidPayload, "payload"},
		{"payload null", func(e *protocol.Envelope) { e.Payload = json.RawMessage(`null`) }, protocol.CodeInvalidPayload, "payload"},
		{"payload array", func(e *protocol.Envelope) { e.Payload = json.RawMessage(`[]`) }, protocol.CodeInvalidPayload, "payload"},
		{"payload string", func(e *protocol.Envelope) { e.Payload = json.RawMessage(`"x"`) }, protocol.CodeInvalidPayload, "payload"},
		{"payload malformed", func(e *protocol.Envelope) { e.Payload = json.RawMessage(`{"text":`) }, protocol.CodeInvalidPayload, "payload"},
		{"payload oversized", func(e *protocol.Envelope) {
			e.Payload = json.RawMessage(`{"message_id":"m","text":"` + strings.Repeat("x", protocol.MaxPayloadBytes) + `"}`)
		}, protocol.CodeTooLarge, "payload"},
		{"terminal token", func(e *protocol.Envelope) { e.Terminal = true }, protocol.CodeBadRequest, "terminal"},
		{"text of the wrong type", func(e *protocol.Envelope) { e.Payload = json.RawMessage(`{"message_id":"m","text":5}`) }, protocol.CodeInvalidPayload, "payload.text"},
		{"message_id of the wrong type", func(e *protocol.Envelope) { e.Payload = json.RawMessage(`{"message_id":{},"text":"x"}`) }, protocol.CodeInvalidPayload, "payload.message_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := valid(t)
			if err := protocol.ValidateEvent(&e); err != nil {
				t.Fatalf("valid event: %v", err)
			}
			tt.mutate(&e)
			wantError(t, protocol.ValidateEvent(&e), tt.code, tt.field)
		})
	}
}

// Payloads whose fields are present but of the wrong JSON type or outside
// the values protocol.md allows are rejected before they reach the journal
// (where the session fold would choke on them).
func TestValidateEvent_PayloadValues(t *testing.T) {
	tests := []struct {
		typ     protocol.EventType
		payload string
		field   string
	}{
		{protocol.EventStatus, `{"status":"dancing","controls":[]}`, "payload.status"},
		{protocol.EventStatus, `{"status":"completed","controls":[]}`, "payload.status"},
		{protocol.EventStatus, `{"status":"running","controls":"cancel"}`, "payload.controls"},
		{protocol.EventDone, `{"status":"failed","usage":null}`, "payload.status"},
		{protocol.EventDone, `{"status":"completed","usage":{"input_tokens":"1"}}`, "payload.usage.input_tokens"},
		{protocol.EventDone, `{"status":"completed","usage":[]}`, "payload.usage"},
		{protocol.EventCancelled, `{"reason":"user","partial":"yes"}`, "payload.partial"},
		{protocol.EventToolDone, `{"tool_call_id":"t","status":"ok","duration_ms":"12","error":false,"result":null}`, "payload.duration_ms"},
		{protocol.EventApprovalReq, `{"approval_id":"a","summary":"s","risk":"low","choices":"once"}`, "payload.choices"},
		{protocol.EventQueueUpdated, `{"depth":"1","items":[]}`, "payload.depth"},
		{protocol.EventUsageFinal, `{"input_tokens":"1","output_tokens":1,"model":"m","provider":"p","duration_ms":1}`, "payload.input_tokens"},
	}
	for _, tt := range tests {
		e := protocol.Envelope{RunID: "r1", SessionID: "s1", Type: tt.typ, Payload: json.RawMessage(tt.payload)}
		e.Terminal = protocol.IsTerminal(e.Type, e.Payload)
		t.Run(string(tt.typ)+" "+tt.field, func(t *testing.T) {
			wantError(t, protocol.ValidateEvent(&e), protocol.CodeInvalidPayload, tt.field)
		})
	}
	// An error event whose terminal is not a boolean is rejected whichever
	// way the envelope's flag points.
	for _, flag := range []bool{true, false} {
		e := protocol.Envelope{RunID: "r1", SessionID: "s1", Type: protocol.EventError, Terminal: flag,
			Payload: json.RawMessage(`{"code":"internal","message":"m","terminal":"yes"}`)}
		if err := protocol.ValidateEvent(&e); err == nil {
			t.Errorf("error event with terminal \"yes\" (flag %v) accepted", flag)
		}
	}
}

func TestValidateEvent_TerminalConsistency(t *testing.T) {
	tests := []struct {
		typ      protocol.EventType
		payload  any
		terminal bool
		ok       bool
	}{
		{protocol.EventDone, minimum[protocol.EventDone], true, true},
		{protocol.EventDone, minimum[protocol.EventDone], false, false},
		{protocol.EventCancelled, minimum[protocol.EventCancelled], true, true},
		{protocol.EventCancelled, minimum[protocol.EventCancelled], false, false},
		{protocol.EventError, map[string]any{"code": "timeout", "message": "m", "terminal": true}, true, true},
		{protocol.EventError, map[string]any{"code": "timeout", "message": "m", "terminal": true}, false, false},
		{protocol.EventError, map[string]any{"code": "provider_error", "message": "retrying", "terminal": false}, false, true},
		{protocol.EventError, map[string]any{"code": "provider_error", "message": "retrying", "terminal": false}, true, false},
		{protocol.EventStatus, minimum[protocol.EventStatus], true, false},
		{protocol.EventProgress, map[string]any{"text": "x", "terminal": true}, false, true},
		{protocol.EventProgress, map[string]any{"text": "x", "terminal": true}, true, false},
	}
	for _, tt := range tests {
		e := event(t, tt.typ, tt.payload)
		e.Terminal = tt.terminal
		err := protocol.ValidateEvent(&e)
		if tt.ok && err != nil {
			t.Errorf("%s %s terminal=%v: %v", tt.typ, e.Payload, tt.terminal, err)
		}
		if !tt.ok {
			wantError(t, err, protocol.CodeBadRequest, "terminal")
		}
	}
}

func TestIsTerminal(t *testing.T) {
	tests := []struct {
		typ     protocol.EventType
		payload string
		want    bool
	}{
		{protocol.EventDone, `{"status":"completed","usage":null}`, true},
		{protocol.EventDone, `{}`, true},
		{protocol.EventDone, `{"terminal":false}`, true},
		{protocol.EventCancelled, `{"reason":"user","partial":false}`, true},
		{protocol.EventCancelled, `null`, true},
		{protocol.EventError, `{"code":"timeout","message":"m","terminal":true}`, true},
		{protocol.EventError, `{"code":"provider_error","message":"m","terminal":false}`, false},
		{protocol.EventError, `{"code":"internal","message":"m"}`, true},
		{protocol.EventError, `{"terminal":null}`, true},
		{protocol.EventError, `{"terminal":"no"}`, true},
		{protocol.EventError, `not json`, true},
		{protocol.EventError, ``, true},
		{protocol.EventStatus, `{"status":"completed","controls":[]}`, false},
		{protocol.EventTokenDelta, `{"terminal":true}`, false},
		{"unknown", `{"terminal":true}`, false},
	}
	for _, tt := range tests {
		if got := protocol.IsTerminal(tt.typ, json.RawMessage(tt.payload)); got != tt.want {
			t.Errorf("IsTerminal(%s, %s) = %v, want %v", tt.typ, tt.payload, got, tt.want)
		}
	}
	for _, typ := range protocol.EventTypes() {
		raw, _ := json.Marshal(minimum[typ])
		if got := protocol.IsTerminal(typ, raw); got != terminalByType[typ] {
			t.Errorf("IsTerminal(%s, minimum) = %v, want %v", typ, got, terminalByType[typ])
		}
	}
}

func TestNewEvent(t *testing.T) {
	e, err := protocol.NewEvent("r1", "s1", protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m1", Text: "Hel"})
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.Envelope{RunID: "r1", SessionID: "s1", Type: protocol.EventTokenDelta,
		Payload: json.RawMessage(`{"message_id":"m1","text":"Hel"}`)}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("got %s\nwant %s", dump(e), dump(want))
	}

	e, err = protocol.NewEvent("r1", "s1", protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted, Message: "gone", Terminal: true, LastSeq: 7})
	if err != nil || !e.Terminal {
		t.Errorf("terminal error: Terminal = %v, err %v", e.Terminal, err)
	}
	e, err = protocol.NewEvent("r1", "s1", protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorProviderError, Message: "retry"})
	if err != nil || e.Terminal {
		t.Errorf("non-terminal error: Terminal = %v, err %v", e.Terminal, err)
	}

	_, err = protocol.NewEvent("r1", "s1", protocol.EventProgress, map[string]any{"text": make(chan int)})
	wantError(t, err, protocol.CodeInvalidPayload, "")
	_, err = protocol.NewEvent("r1", "s1", protocol.EventProgress, map[string]any{"x": math.NaN()})
	wantError(t, err, protocol.CodeInvalidPayload, "")
}

func TestDecodePayload(t *testing.T) {
	e := event(t, protocol.EventApprovalReq, minimum[protocol.EventApprovalReq])
	p, err := protocol.DecodePayload[protocol.ApprovalRequestedPayload](&e)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.ApprovalRequestedPayload{ApprovalID: "a1", Summary: "rm -rf build", Risk: "high",
		Choices: []string{"once", "session", "always", "deny"}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %+v, want %+v", p, want)
	}
	e.Payload = json.RawMessage(`{"approval_id":1}`)
	_, err = protocol.DecodePayload[protocol.ApprovalRequestedPayload](&e)
	wantError(t, err, protocol.CodeBadRequest, "approval_id")
}

func TestTimestamp(t *testing.T) {
	now := time.Date(2026, 5, 14, 9, 13, 20, 123456789, time.UTC)
	ts := protocol.Timestamp(now)
	if want := 1778750000.123456; math.Abs(ts-want) > 1e-6 {
		t.Errorf("Timestamp = %f, want %f", ts, want)
	}
	if got := protocol.Time(ts); !got.Equal(now.Truncate(time.Microsecond)) {
		t.Errorf("Time(Timestamp(t)) = %v, want %v", got, now.Truncate(time.Microsecond))
	}
	for _, us := range []int64{0, 1, 999999, 1778750000123456, 1778750000999999} {
		tm := time.UnixMicro(us)
		if got := protocol.Time(protocol.Timestamp(tm)); !got.Equal(tm) {
			t.Errorf("round trip of %d µs: %v", us, got.UnixMicro())
		}
	}
}

func TestError(t *testing.T) {
	err := protocol.Errorf(protocol.CodeTooLarge, "frame is %d bytes", 9)
	if err.Error() != "too_large: frame is 9 bytes" {
		t.Errorf("Error() = %q", err.Error())
	}
	wrapped := fmtErr(err)
	if !errorsIs(wrapped, &protocol.Error{Code: protocol.CodeTooLarge}) {
		t.Errorf("errors.Is by code failed")
	}
	if errorsIs(wrapped, &protocol.Error{Code: protocol.CodeBadRequest}) {
		t.Errorf("errors.Is matched another code")
	}
	if !errorsIs(wrapped, &protocol.Error{Code: protocol.CodeTooLarge, Message: "frame is 9 bytes"}) {
		t.Errorf("errors.Is by code and message failed")
	}
	if errorsIs(wrapped, &protocol.Error{Code: protocol.CodeTooLarge, Message: "other"}) {
		t.Errorf("errors.Is matched another message")
	}
	if got := protocol.CodeOf(wrapped); got != protocol.CodeTooLarge {
		t.Errorf("CodeOf(wrapped) = %q", got)
	}
	if got := protocol.CodeOf(errPlain); got != protocol.CodeInternal {
		t.Errorf("CodeOf(plain) = %q", got)
	}
	b, _ := json.Marshal(protocol.ErrorBody{Error: &protocol.Error{Code: protocol.CodeNotFound, Message: "no run r1"}})
	if string(b) != `{"error":{"code":"not_found","message":"no run r1"}}` {
		t.Errorf("ErrorBody = %s", b)
	}
	for c := range knownCodes {
		if c == "" || strings.ToLower(string(c)) != string(c) {
			t.Errorf("code %q is not a lower-case word", c)
		}
	}
}
