package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// DecodePayload decodes an envelope's payload into a value of type T.
func DecodePayload[T any](e *Envelope) (T, error) {
	var v T
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		return v, fmt.Errorf("payload of %s %s: %w", e.Type, e.EventID, jsonError(err))
	}
	return v, nil
}

// requiredPayloadFields lists, per event type, the payload fields protocol v1
// requires (the "minimum payload").
var requiredPayloadFields = map[EventType][]string{
	EventRunStarted:     {"message", "profile", "model", "provider", "workspace", "toolsets", "source"},
	EventStatus:         {"status", "controls"},
	EventTokenDelta:     {"message_id", "text"},
	EventReasoningDelta: {"block_id", "text"},
	EventReasoningDone:  {"block_id", "text"},
	EventProgress:       {"text"},
	EventToolStarted:    {"tool_call_id", "name", "args"},
	EventToolUpdated:    {"tool_call_id", "stream"},
	EventToolDone:       {"tool_call_id", "status", "duration_ms", "error", "result"},
	EventApprovalReq:    {"approval_id", "summary", "risk", "choices"},
	EventApprovalRes:    {"approval_id", "choice", "status"},
	EventClarifyReq:     {"clarify_id", "question", "choices", "input_mode"},
	EventClarifyRes:     {"clarify_id", "status"},
	EventTitleUpdated:   {"title", "source"},
	EventUsageUpdated:   {"input_tokens", "output_tokens", "model", "provider", "duration_ms"},
	EventUsageFinal:     {"input_tokens", "output_tokens", "model", "provider", "duration_ms"},
	EventQueueUpdated:   {"depth", "items"},
	EventGoalUpdated:    {"state", "text"},
	EventDone:           {"status", "usage"},
	EventCancelled:      {"reason", "partial"},
	EventError:          {"code", "message", "terminal"},
}

// ValidateEvent checks an unsequenced event before it is journaled: a known
// type, ids, a JSON object payload within MaxPayloadBytes holding the
// minimum fields of its type, and Terminal consistent with type and payload.
func ValidateEvent(e *Envelope) error {
	if !e.Type.Known() {
		return fieldError(CodeBadRequest, "type", "unknown event type %q", Truncate(string(e.Type), 40))
	}
	if err := firstErr(optID("run_id", e.RunID), optID("session_id", e.SessionID),
		required("run_id", e.RunID), required("session_id", e.SessionID)); err != nil {
		return err
	}
	if len(e.Payload) > MaxPayloadBytes {
		return fieldError(CodeTooLarge, "payload", "is %d bytes, limit %d", len(e.Payload), MaxPayloadBytes)
	}
	if key, ok := deltaIDKey(e.Type); ok && !e.Terminal && validDelta(e.Payload, key) {
		return nil // the common delta shape (fastdelta.go); it is never terminal
	}
	return validatePayload(e)
}

// validatePayload is ValidateEvent's full check of the payload: a JSON
// object holding the type's required fields, with the values its payload
// struct wants, and Terminal consistent with type and payload.
func validatePayload(e *Envelope) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Payload, &fields); err != nil || fields == nil {
		return fieldError(CodeInvalidPayload, "payload", "must be a JSON object")
	}
	for _, f := range requiredPayloadFields[e.Type] {
		if _, ok := fields[f]; !ok {
			return fieldError(CodeInvalidPayload, "payload."+f, "is required for %s", e.Type)
		}
	}
	if e.Type == EventToolUpdated {
		_, hasText := fields["text"]
		_, hasData := fields["data"]
		if !hasText && !hasData {
			return fieldError(CodeInvalidPayload, "payload.text", "tool.updated needs text or data")
		}
	}
	if err := checkPayloadValues(e.Type, e.Payload); err != nil {
		return err
	}
	if e.Terminal != IsTerminal(e.Type, e.Payload) {
		return fieldError(CodeBadRequest, "terminal", "is %v but a %s event with this payload is %v", e.Terminal, e.Type, !e.Terminal)
	}
	return nil
}

// typedPayload returns a pointer to the typed payload of t, nil for an
// unknown type.
func typedPayload(t EventType) any {
	switch t {
	case EventRunStarted:
		return &RunStartedPayload{}
	case EventStatus:
		return &StatusPayload{}
	case EventTokenDelta:
		return &TokenDeltaPayload{}
	case EventReasoningDelta, EventReasoningDone:
		return &ReasoningPayload{}
	case EventProgress:
		return &ProgressPayload{}
	case EventToolStarted:
		return &ToolStartedPayload{}
	case EventToolUpdated:
		return &ToolUpdatedPayload{}
	case EventToolDone:
		return &ToolDonePayload{}
	case EventApprovalReq:
		return &ApprovalRequestedPayload{}
	case EventApprovalRes:
		return &ApprovalResolvedPayload{}
	case EventClarifyReq:
		return &ClarifyRequestedPayload{}
	case EventClarifyRes:
		return &ClarifyResolvedPayload{}
	case EventTitleUpdated:
		return &TitleUpdatedPayload{}
	case EventUsageUpdated, EventUsageFinal:
		return &Usage{}
	case EventQueueUpdated:
		return &QueueUpdatedPayload{}
	case EventGoalUpdated:
		return &GoalUpdatedPayload{}
	case EventDone:
		return &DonePayload{}
	case EventCancelled:
		return &CancelledPayload{}
	case EventError:
		return &ErrorPayload{}
	}
	return nil
}

// checkPayloadValues decodes the payload into its typed form, so a field of
// the wrong JSON type is rejected here rather than by every reader of the
// journal, and checks the values protocol v1 enumerates.
func checkPayloadValues(t EventType, raw json.RawMessage) error {
	v := typedPayload(t)
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fieldError(CodeInvalidPayload, "payload."+te.Field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fieldError(CodeInvalidPayload, "payload", "%v", err)
	}
	switch p := v.(type) {
	case *StatusPayload:
		if !p.Status.Known() || p.Status.Terminal() {
			return fieldError(CodeInvalidPayload, "payload.status", "%q is not a non-terminal run status", Truncate(string(p.Status), 40))
		}
	case *DonePayload:
		if p.Status != string(StatusCompleted) {
			return fieldError(CodeInvalidPayload, "payload.status", "must be %q", StatusCompleted)
		}
		if len(p.Result) > MaxResultBytes {
			return fieldError(CodeInvalidPayload, "payload.result", "is %d bytes, limit %d", len(p.Result), MaxResultBytes)
		}
	}
	return nil
}
