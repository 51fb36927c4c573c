package protocol

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// EventType names an event family member.
type EventType string

// The event types of protocol v1.
const (
	EventRunStarted     EventType = "run.started"
	EventStatus         EventType = "status"
	EventTokenDelta     EventType = "token.delta"
	EventReasoningDelta EventType = "reasoning.delta"
	EventReasoningDone  EventType = "reasoning.done"
	EventProgress       EventType = "progress"
	EventToolStarted    EventType = "tool.started"
	EventToolUpdated    EventType = "tool.updated"
	EventToolDone       EventType = "tool.done"
	EventApprovalReq    EventType = "approval.requested"
	EventApprovalRes    EventType = "approval.resolved"
	EventClarifyReq     EventType = "clarify.requested"
	EventClarifyRes     EventType = "clarify.resolved"
	EventTitleUpdated   EventType = "title.updated"
	EventUsageUpdated   EventType = "usage.updated"
	EventUsageFinal     EventType = "usage.final"
	EventQueueUpdated   EventType = "queue.updated"
	EventGoalUpdated    EventType = "goal.updated"
	EventDone           EventType = "done"
	EventCancelled      EventType = "cancelled"
	EventError          EventType = "error"
)

// EventTypes lists every event type of protocol v1.
var eventTypes = []EventType{
	EventRunStarted, EventStatus, EventTokenDelta, EventReasoningDelta, EventReasoningDone,
	EventProgress, EventToolStarted, EventToolUpdated, EventToolDone, EventApprovalReq,
	EventApprovalRes, EventClarifyReq, EventClarifyRes, EventTitleUpdated, EventUsageUpdated,
	EventUsageFinal, EventQueueUpdated, EventGoalUpdated, EventDone, EventCancelled, EventError,
}

// EventTypes returns every event type of protocol v1.
func EventTypes() []EventType { return slices.Clone(eventTypes) }

// Known reports whether t is an event type of protocol v1.
func (t EventType) Known() bool { return slices.Contains(eventTypes, t) }

// IsDelta reports whether events of this type are high-rate stream content
// (tokens, reasoning text, tool output) rather than state changes.
func (t EventType) IsDelta() bool {
	return t == EventTokenDelta || t == EventReasoningDelta || t == EventToolUpdated
}

// RunStartedPayload is the payload of run.started.
type RunStartedPayload struct {
	Message   string   `json:"message"`
	Profile   string   `json:"profile"`
	Model     string   `json:"model"`
	Provider  string   `json:"provider"`
	Workspace string   `json:"workspace"`
	Toolsets  []string `json:"toolsets"`
	Source    string   `json:"source"`
}

// StatusPayload is the payload of status.
type StatusPayload struct {
	Status   Status   `json:"status"`
	Controls []string `json:"controls"`
}

// TokenDeltaPayload is the payload of token.delta.
type TokenDeltaPayload struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// ReasoningPayload is the payload of reasoning.delta and reasoning.done.
type ReasoningPayload struct {
	BlockID string `json:"block_id"`
	Text    string `json:"text"`
}

// ProgressPayload is the payload of progress.
type ProgressPayload struct {
	Text       string `json:"text"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Steer is the user's guidance (queue mode steer) as the runtime
	// accepted it for the run: the event records a user message.
	Steer string `json:"steer,omitempty"`
	// AGUI is the AG-UI event an agui profile's run journals as progress
	// (state, messages and activity snapshots and deltas, steps, custom
	// and raw events, ...), as the agent sent it (docs/agui.md, "AG-UI
	// agents as runtimes").
	AGUI json.RawMessage `json:"agui,omitempty"`
}

// ToolStartedPayload is the payload of tool.started.
type ToolStartedPayload struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Args       json.RawMessage `json:"args"`
}

// ToolUpdatedPayload is the payload of tool.updated.
type ToolUpdatedPayload struct {
	ToolCallID string          `json:"tool_call_id"`
	Stream     string          `json:"stream"` // stdout, stderr or data
	Text       string          `json:"text,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// ToolDonePayload is the payload of tool.done.
type ToolDonePayload struct {
	ToolCallID string          `json:"tool_call_id"`
	Status     string          `json:"status"`
	DurationMS int64           `json:"duration_ms"`
	Error      bool            `json:"error"`
	Result     json.RawMessage `json:"result"`
}

// ApprovalRequestedPayload is the payload of approval.requested.
type ApprovalRequestedPayload struct {
	ApprovalID string   `json:"approval_id"`
	Summary    string   `json:"summary"`
	Risk       string   `json:"risk"`
	Choices    []string `json:"choices"`
	// Unknown names the fields the runtime did not give (PromptRisk,
	// PromptChoices): their value is then empty, not made up.
	Unknown []string `json:"unknown,omitempty"`
}

// The fields of approval.requested a runtime may leave unknown.
const (
	PromptRisk    = "risk"
	PromptChoices = "choices"
)

// ApprovalResolvedPayload is the payload of approval.resolved.
type ApprovalResolvedPayload struct {
	ApprovalID string `json:"approval_id"`
	Choice     string `json:"choice"`
	Status     string `json:"status"` // resolved, expired, cancelled
}

// ClarifyRequestedPayload is the payload of clarify.requested.
type ClarifyRequestedPayload struct {
	ClarifyID string   `json:"clarify_id"`
	Question  string   `json:"question"`
	Choices   []string `json:"choices"`
	InputMode string   `json:"input_mode"` // text, choice
}

// ClarifyResolvedPayload is the payload of clarify.resolved.
type ClarifyResolvedPayload struct {
	ClarifyID string `json:"clarify_id"`
	Status    string `json:"status"` // resolved, expired, cancelled
	Response  string `json:"response,omitempty"`
}

// TitleUpdatedPayload is the payload of title.updated.
type TitleUpdatedPayload struct {
	Title  string `json:"title"`
	Source string `json:"source"`
}

// Usage is the payload of usage.updated and usage.final, and the usage of a
// SessionStatus and a done event.
type Usage struct {
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Model        string `json:"model"`
	Provider     string `json:"provider"`
	DurationMS   int64  `json:"duration_ms"`
}

// QueueItem is one queued message in queue.updated.
type QueueItem struct {
	ID      string `json:"id"`
	Preview string `json:"preview"`
}

// QueueUpdatedPayload is the payload of queue.updated.
type QueueUpdatedPayload struct {
	Depth int         `json:"depth"`
	Items []QueueItem `json:"items"`
}

// Goal states.
const (
	GoalActive  = "active"
	GoalPaused  = "paused"
	GoalCleared = "cleared"
	GoalDone    = "done"
)

// GoalUpdatedPayload is the payload of goal.updated, and the goal of a
// SessionStatus.
type GoalUpdatedPayload struct {
	State  string `json:"state"`
	Text   string `json:"text"`
	Turns  int    `json:"turns,omitempty"`
	Reason string `json:"reason,omitempty"`
	// UnreadableVerdicts counts the goal judge's answers in a row that
	// held no verdict; at 3 the goal pauses.
	UnreadableVerdicts int `json:"unreadable_verdicts,omitempty"`
}

// DonePayload is the payload of done.
type DonePayload struct {
	Status string `json:"status"` // always "completed"
	Usage  *Usage `json:"usage"`
	// Result is the run's final assistant text (its last assistant
	// message), redacted, at most MaxResultBytes; Truncated says it was
	// cut. Events journaled before result existed have neither.
	Result    string `json:"result"`
	Truncated bool   `json:"truncated,omitempty"`
	// LastSeq is the seq of the run's last event before done: a client
	// that has seen it has all of the run's output.
	LastSeq uint64 `json:"last_seq"`
}

// MaxResultBytes bounds DonePayload.Result and RunStatus.Result.
const MaxResultBytes = 4 << 10

// CapResult cuts s to at most MaxResultBytes at a character boundary and
// reports whether it cut.
func CapResult(s string) (string, bool) {
	if len(s) <= MaxResultBytes {
		return s, false
	}
	i := MaxResultBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// CancelledPayload is the payload of cancelled.
type CancelledPayload struct {
	Reason  string `json:"reason"`
	Partial bool   `json:"partial"`
}

// Error codes carried by error events.
const (
	ErrorProviderError = "provider_error"
	ErrorTimeout       = "timeout"
	ErrorInternal      = "internal"
	ErrorInterrupted   = "interrupted"
	ErrorNoRunner      = "no_runner" // no executor (runner) started the run within the start timeout
)

// ErrorPayload is the payload of error. LastSeq is set on interrupted
// errors: the last seq the journal held when the executor was found gone.
type ErrorPayload struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Terminal bool   `json:"terminal"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
}
