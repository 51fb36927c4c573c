package protocol

import "encoding/json"

// Attachment is a file reference passed with a start or queue request.
type Attachment struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type,omitempty"`
	URL       string `json:"url,omitempty"`
	Size      int64  `json:"size,omitempty"`
}

// StartRunRequest starts a run in a session (a new one when SessionID is
// empty on the WebSocket control path).
type StartRunRequest struct {
	SessionID   string          `json:"session_id,omitempty"`
	Message     string          `json:"message"`
	Attachments []Attachment    `json:"attachments,omitempty"`
	Workspace   string          `json:"workspace,omitempty"`
	Profile     string          `json:"profile,omitempty"`
	Provider    string          `json:"provider,omitempty"`
	Model       string          `json:"model,omitempty"`
	Toolsets    []string        `json:"toolsets,omitempty"`
	Source      string          `json:"source,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// RunStartResult answers a start.
type RunStartResult struct {
	RunID          string   `json:"run_id"`
	SessionID      string   `json:"session_id"`
	StreamID       string   `json:"stream_id"`
	Status         Status   `json:"status"`
	StartedAt      float64  `json:"started_at"`
	Cursor         string   `json:"cursor"`
	ActiveControls []string `json:"active_controls"`
	// Waiting is WaitingRunner when the run is queued for a runner process
	// and none has been alive lately (runtime=runners); Message then says
	// what to do. Both are omitted otherwise.
	Waiting string `json:"waiting,omitempty"`
	Message string `json:"message,omitempty"`
}

// WaitingRunner is the Waiting of a queued run (its start, its status, its
// session's status) that waits for a runner process while none has been
// alive lately: the hub dispatches runs to runners (runtime=runners) and
// no `hub runner` is taking them.
const WaitingRunner = "runner"

// RunStatus is the state of one run.
type RunStatus struct {
	RunID             string   `json:"run_id"`
	SessionID         string   `json:"session_id"`
	Status            Status   `json:"status"`
	LastSeq           uint64   `json:"last_seq"`
	LastEventID       string   `json:"last_event_id"`
	Terminal          bool     `json:"terminal"`
	TerminalState     Status   `json:"terminal_state,omitempty"`
	ActiveControls    []string `json:"active_controls"`
	PendingApprovalID string   `json:"pending_approval_id,omitempty"`
	PendingClarifyID  string   `json:"pending_clarify_id,omitempty"`
	// Waiting: see RunStartResult.Waiting.
	Waiting string `json:"waiting,omitempty"`
	// Result is a completed run's final assistant text (done's result,
	// at most MaxResultBytes; ResultTruncated says it was cut); absent
	// while the run is live, when it ended otherwise, or said nothing.
	Result          string `json:"result,omitempty"`
	ResultTruncated bool   `json:"result_truncated,omitempty"`
	// Error is why a run that ended with a terminal error (failed,
	// expired, interrupted) ended; absent otherwise.
	Error *RunError `json:"error,omitempty"`
}

// RunError is the code and message of a run's terminal error event.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ControlResult answers a control. Message is always safe to show a user.
type ControlResult struct {
	Accepted  bool   `json:"accepted"`
	Status    string `json:"status"`
	EventID   string `json:"event_id,omitempty"`
	Message   string `json:"message,omitempty"`
	RunID     string `json:"run_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// PendingApproval is an approval prompt waiting for a user: what
// approval.requested asked.
type PendingApproval = ApprovalRequestedPayload

// PendingClarify is a clarify question waiting for a user: what
// clarify.requested asked.
type PendingClarify = ClarifyRequestedPayload

// SessionStatus is what a watching tab sees of a session.
type SessionStatus struct {
	SessionID       string              `json:"session_id"`
	Title           string              `json:"title"`
	RunID           string              `json:"run_id"`
	Status          Status              `json:"status"`
	LastSeq         uint64              `json:"last_seq"`
	LastEventID     string              `json:"last_event_id"`
	Terminal        bool                `json:"terminal"`
	TerminalState   Status              `json:"terminal_state,omitempty"`
	ActiveControls  []string            `json:"active_controls"`
	PendingApproval *PendingApproval    `json:"pending_approval"`
	PendingClarify  *PendingClarify     `json:"pending_clarify"`
	Progress        string              `json:"progress"`
	Tokens          int64               `json:"tokens"`
	Usage           *Usage              `json:"usage"`
	QueueDepth      int                 `json:"queue_depth"`
	Goal            *GoalUpdatedPayload `json:"goal"`
	UpdatedAt       float64             `json:"updated_at"`
	CreatedAt       float64             `json:"created_at,omitempty"` // the session's creation
	// Deleted marks the last status of a deleted session: watchers drop it.
	Deleted bool `json:"deleted,omitempty"`
	// Presence is who has the session open over every hub; omitted when
	// no tab does.
	Presence *Presence `json:"presence,omitempty"`
	// Waiting: see RunStartResult.Waiting (its latest run's).
	Waiting string `json:"waiting,omitempty"`
}

// MaxPresenceSubjects bounds Presence.Subjects; the counts cover every
// subject all the same.
const MaxPresenceSubjects = 16

// Presence counts the tabs that have a session open, over every hub:
// watching its status (by id, or with watch all of its owner's sessions;
// a tab counts once) and focusing it. Only the owner and admins can see a
// session's status, so only they see who is there.
type Presence struct {
	Watching int               `json:"watching"`
	Focused  int               `json:"focused"`
	Subjects []PresenceSubject `json:"subjects"` // by subject, at most MaxPresenceSubjects
}

// PresenceSubject is one subject's tabs in a Presence.
type PresenceSubject struct {
	Subject  string `json:"subject"`
	Watching int    `json:"watching"`
	Focused  int    `json:"focused"`
}

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	Title string `json:"title,omitempty"`
}

// CreateSessionResult answers POST /v1/sessions.
type CreateSessionResult struct {
	SessionID string `json:"session_id"`
}

// SessionList answers GET /v1/sessions. More is set on a page
// (?limit=N&after=<sid>): true when later sessions follow the last one.
type SessionList struct {
	Sessions []SessionStatus `json:"sessions"`
	More     *bool           `json:"more,omitempty"`
}

// EventPage answers GET /v1/runs/{rid}/events.
type EventPage struct {
	Events     []Envelope `json:"events"`
	NextCursor string     `json:"next_cursor"`
	Terminal   bool       `json:"terminal"`
}

// ApprovalRequest is the body of POST /v1/runs/{rid}/approvals/{aid}.
type ApprovalRequest struct {
	Choice string `json:"choice"`
}

// ClarifyRequest is the body of POST /v1/runs/{rid}/clarifications/{cid}.
type ClarifyRequest struct {
	Response string `json:"response"`
}

// QueueRequest is the body of POST /v1/sessions/{sid}/queue.
type QueueRequest struct {
	Message string `json:"message"`
	Mode    string `json:"mode,omitempty"` // queue (default) or steer
}

// GoalRequest is the body of POST /v1/sessions/{sid}/goal.
type GoalRequest struct {
	Action string `json:"action"`
	Text   string `json:"text,omitempty"`
}

// ErrorBody is every HTTP error answer: {"error": {code, message}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// RunSummary is one run of a session as GET /v1/sessions/{sid}/runs lists
// it: enough to draw the run's header before its events are read.
type RunSummary struct {
	RunID         string  `json:"run_id"`
	SessionID     string  `json:"session_id"`
	Status        Status  `json:"status"`
	CreatedAt     float64 `json:"created_at"`
	LastSeq       uint64  `json:"last_seq"`
	Terminal      bool    `json:"terminal"`
	TerminalState Status  `json:"terminal_state,omitempty"`
	EndedAt       float64 `json:"ended_at,omitempty"`
	Source        string  `json:"source,omitempty"`
	Message       string  `json:"message"` // the prompt, cut to RunSummaryMessageBytes
}

// RunSummaryMessageBytes bounds RunSummary.Message (plus "…").
const RunSummaryMessageBytes = 200

// RunList answers GET /v1/sessions/{sid}/runs: a page of the session's
// runs, newest first. More is true when older runs precede the last one
// listed (ask again with before = its run_id).
type RunList struct {
	Runs []RunSummary `json:"runs"`
	More bool         `json:"more"`
}

// RenameSessionRequest is the body of PATCH /v1/sessions/{sid}.
type RenameSessionRequest struct {
	Title *string `json:"title"`
}

// DeleteSessionResult answers DELETE /v1/sessions/{sid}.
type DeleteSessionResult struct {
	SessionID string `json:"session_id"`
	Deleted   bool   `json:"deleted"`
}
