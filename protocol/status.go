package protocol

// Status is a run status.
type Status string

// The run statuses of protocol v1.
const (
	StatusQueued           Status = "queued"
	StatusRunning          Status = "running"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusAwaitingClarify  Status = "awaiting_clarify"
	StatusPaused           Status = "paused"
	StatusCancelling       Status = "cancelling"
	StatusCancelled        Status = "cancelled"
	StatusFailed           Status = "failed"
	StatusCompleted        Status = "completed"
	StatusExpired          Status = "expired"
	StatusInterrupted      Status = "interrupted"
)

// Statuses lists every run status.
func Statuses() []Status {
	return []Status{StatusQueued, StatusRunning, StatusAwaitingApproval, StatusAwaitingClarify,
		StatusPaused, StatusCancelling, StatusCancelled, StatusFailed, StatusCompleted,
		StatusExpired, StatusInterrupted}
}

// Known reports whether s is a run status of protocol v1.
func (s Status) Known() bool {
	for _, k := range Statuses() {
		if k == s {
			return true
		}
	}
	return false
}

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	switch s {
	case StatusCancelled, StatusFailed, StatusCompleted, StatusExpired, StatusInterrupted:
		return true
	}
	return false
}

// Control ops.
const (
	OpStart   = "start"
	OpCancel  = "cancel"
	OpApprove = "approve"
	OpClarify = "clarify"
	OpQueue   = "queue"
	OpGoal    = "goal"
)

// ControlResult statuses.
const (
	ResultAccepted    = "accepted"
	ResultNotActive   = "not-active"
	ResultExpired     = "expired"
	ResultConflict    = "conflict"
	ResultUnsupported = "unsupported"
)
