package agui

import (
	"encoding/json"
	"fmt"

	"github.com/runhub/runhub/protocol"
)

// The AG-UI 1.0 event types (@ag-ui/core's EventType).
const (
	TextMessageStart        = "TEXT_MESSAGE_START"
	TextMessageContent      = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd          = "TEXT_MESSAGE_END"
	TextMessageChunk        = "TEXT_MESSAGE_CHUNK"
	ToolCallStart           = "TOOL_CALL_START"
	ToolCallArgs            = "TOOL_CALL_ARGS"
	ToolCallEnd             = "TOOL_CALL_END"
	ToolCallChunk           = "TOOL_CALL_CHUNK"
	ToolCallResult          = "TOOL_CALL_RESULT"
	StateSnapshot           = "STATE_SNAPSHOT"
	StateDelta              = "STATE_DELTA"
	MessagesSnapshot        = "MESSAGES_SNAPSHOT"
	ActivitySnapshot        = "ACTIVITY_SNAPSHOT"
	ActivityDelta           = "ACTIVITY_DELTA"
	Raw                     = "RAW"
	Custom                  = "CUSTOM"
	RunStarted              = "RUN_STARTED"
	RunFinished             = "RUN_FINISHED"
	RunError                = "RUN_ERROR"
	StepStarted             = "STEP_STARTED"
	StepFinished            = "STEP_FINISHED"
	ReasoningStart          = "REASONING_START"
	ReasoningMessageStart   = "REASONING_MESSAGE_START"
	ReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd     = "REASONING_MESSAGE_END"
	ReasoningMessageChunk   = "REASONING_MESSAGE_CHUNK"
	ReasoningEnd            = "REASONING_END"
	ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE"
	SubagentStarted         = "SUBAGENT_STARTED"
	SubagentFinished        = "SUBAGENT_FINISHED"
	SubagentError           = "SUBAGENT_ERROR"
)

// EventTypes lists every AG-UI 1.0 event type, in @ag-ui/core's order.
var EventTypes = []string{
	TextMessageStart, TextMessageContent, TextMessageEnd, TextMessageChunk,
	ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallChunk, ToolCallResult,
	StateSnapshot, StateDelta, MessagesSnapshot, ActivitySnapshot, ActivityDelta,
	Raw, Custom, RunStarted, RunFinished, RunError, StepStarted, StepFinished,
	ReasoningStart, ReasoningMessageStart, ReasoningMessageContent, ReasoningMessageEnd,
	ReasoningMessageChunk, ReasoningEnd, ReasoningEncryptedValue,
	SubagentStarted, SubagentFinished, SubagentError,
}

// MalformedError is an AG-UI event the driver cannot read: not JSON, not
// an object, no type, or a field of its type missing or of the wrong kind.
// The run ends with it (provider_error); what was journaled before stays.
type MalformedError struct {
	N      int    // the event's place in the stream, from 1
	Type   string // its type, when it had one
	Reason string
}

func (e *MalformedError) Error() string {
	t := ""
	if e.Type != "" {
		t = " (" + protocol.Truncate(e.Type, 40) + ")"
	}
	return fmt.Sprintf("the agent sent a malformed AG-UI event #%d%s: %s", e.N, t, e.Reason)
}

// event is one AG-UI event as the driver reads it: the fields of every
// type, decoded where present (a pointer or a raw value tells absent from
// empty).
type event struct {
	Type            string          `json:"type"`
	MessageID       *string         `json:"messageId"`
	Role            *string         `json:"role"`
	Delta           json.RawMessage `json:"delta"`
	ToolCallID      *string         `json:"toolCallId"`
	ToolCallName    *string         `json:"toolCallName"`
	ParentMessageID *string         `json:"parentMessageId"`
	Content         json.RawMessage `json:"content"`
	StepName        *string         `json:"stepName"`
	Name            *string         `json:"name"`
	Value           json.RawMessage `json:"value"`
	Snapshot        json.RawMessage `json:"snapshot"`
	Messages        json.RawMessage `json:"messages"`
	ActivityType    *string         `json:"activityType"`
	Patch           json.RawMessage `json:"patch"`
	Event           json.RawMessage `json:"event"`
	Source          *string         `json:"source"`
	ThreadID        *string         `json:"threadId"`
	RunID           *string         `json:"runId"`
	Outcome         json.RawMessage `json:"outcome"`
	Usage           []tokenUsage    `json:"usage"`
	Message         *string         `json:"message"`
	Code            *string         `json:"code"`
	Subtype         *string         `json:"subtype"`
	EntityID        *string         `json:"entityId"`
	SubagentRunID   *string         `json:"subagentRunId"`
}

type tokenUsage struct {
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
}

// Outcome is how an AG-UI run ended (RUN_FINISHED's outcome, or its
// RUN_ERROR).
type Outcome struct {
	Type               string      `json:"type"` // success, interrupt, cancelled; "" before the end
	Interrupts         []Interrupt `json:"interrupts"`
	PendingToolCallIDs []string    `json:"pendingToolCallIds"`
}

// Interrupt is one interrupt of an interrupt outcome.
type Interrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message"`
	ToolCallID     string          `json:"toolCallId"`
	ResponseSchema json.RawMessage `json:"responseSchema"`
	ExpiresAt      string          `json:"expiresAt"`
}

// missing names the first field e's type requires that it lacks (the
// @ag-ui/core schemas' required fields), or "".
func missing(e *event) string {
	need := func(ok bool, name string) string {
		if ok {
			return ""
		}
		return name
	}
	str := func(raw json.RawMessage) bool {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	switch e.Type {
	case TextMessageStart, TextMessageEnd, ReasoningStart, ReasoningMessageStart, ReasoningMessageEnd, ReasoningEnd:
		return need(e.MessageID != nil, "messageId")
	case TextMessageContent, ReasoningMessageContent:
		if e.MessageID == nil {
			return "messageId"
		}
		return need(str(e.Delta), "delta (a string)")
	case TextMessageChunk, ReasoningMessageChunk, ToolCallChunk:
		return need(len(e.Delta) == 0 || str(e.Delta), "delta (a string)")
	case ToolCallStart:
		if e.ToolCallID == nil {
			return "toolCallId"
		}
		return need(e.ToolCallName != nil, "toolCallName")
	case ToolCallArgs:
		if e.ToolCallID == nil {
			return "toolCallId"
		}
		return need(str(e.Delta), "delta (a string)")
	case ToolCallEnd:
		return need(e.ToolCallID != nil, "toolCallId")
	case ToolCallResult:
		if e.ToolCallID == nil {
			return "toolCallId"
		}
		if e.MessageID == nil {
			return "messageId"
		}
		return need(len(e.Content) > 0 && (e.Content[0] == '"' || e.Content[0] == '['), "content (a string or parts)")
	case StateSnapshot:
		return need(len(e.Snapshot) > 0, "snapshot")
	case StateDelta:
		return need(len(e.Delta) > 0 && e.Delta[0] == '[', "delta (a JSON Patch)")
	case MessagesSnapshot:
		return need(len(e.Messages) > 0 && e.Messages[0] == '[', "messages")
	case ActivitySnapshot:
		if e.MessageID == nil || e.ActivityType == nil {
			return "messageId and activityType"
		}
		return need(len(e.Content) > 0 && e.Content[0] == '{', "content (an object)")
	case ActivityDelta:
		if e.MessageID == nil || e.ActivityType == nil {
			return "messageId and activityType"
		}
		return need(len(e.Patch) > 0 && e.Patch[0] == '[', "patch")
	case Raw:
		return need(len(e.Event) > 0, "event")
	case Custom:
		return need(e.Name != nil && len(e.Value) > 0, "name and value")
	case RunStarted, RunFinished:
		return need(e.ThreadID != nil && e.RunID != nil, "threadId and runId")
	case RunError:
		return need(e.Message != nil, "message")
	case StepStarted, StepFinished:
		return need(e.StepName != nil, "stepName")
	case ReasoningEncryptedValue:
		return need(e.Subtype != nil && e.EntityID != nil, "subtype, entityId and encryptedValue")
	case SubagentStarted:
		return need(e.SubagentRunID != nil && e.Name != nil, "subagentRunId and name")
	case SubagentFinished:
		return need(e.SubagentRunID != nil, "subagentRunId")
	case SubagentError:
		return need(e.SubagentRunID != nil && e.Message != nil, "subagentRunId and message")
	}
	return ""
}
