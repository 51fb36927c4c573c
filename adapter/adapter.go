package adapter

import (
	"context"
	"errors"
	"iter"

	"github.com/runhub/runhub/protocol"
)

// RuntimeAdapter is the contract's adapter surface. Control methods answer
// with a bounded ControlResult (accepted, not-active, expired, conflict,
// unsupported) and an error only for faults (ErrNotFound for an unknown run
// or session, storage failures).
type RuntimeAdapter interface {
	// StartRun starts a run in req.SessionID (a new session owned by owner
	// when empty). A session with an active run answers ErrConflict.
	StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error)
	// ObserveRun yields the run's events after afterSeq, then live ones, and
	// ends after the terminal event (or when ctx ends).
	ObserveRun(ctx context.Context, runID string, afterSeq uint64) iter.Seq2[protocol.Envelope, error]
	// GetRun reports the run's status.
	GetRun(ctx context.Context, runID string) (protocol.RunStatus, error)
	CancelRun(ctx context.Context, runID string) (protocol.ControlResult, error)
	RespondApproval(ctx context.Context, runID, approvalID, choice string) (protocol.ControlResult, error)
	RespondClarify(ctx context.Context, runID, clarifyID, response string) (protocol.ControlResult, error)
	QueueMessage(ctx context.Context, owner, sessionID string, req protocol.QueueRequest, key string) (protocol.ControlResult, error)
	UpdateGoal(ctx context.Context, sessionID string, req protocol.GoalRequest) (protocol.ControlResult, error)
}

// Errors of the adapter.
var (
	ErrNotFound = errors.New("adapter: not found")
	ErrConflict = errors.New("adapter: session has an active run")
	ErrClosed   = errors.New("adapter: closed")
)

// Result builds a ControlResult; Accepted follows status.
func Result(status, message, runID, sessionID, eventID string) protocol.ControlResult {
	return protocol.ControlResult{Accepted: status == protocol.ResultAccepted, Status: status,
		Message: message, RunID: runID, SessionID: sessionID, EventID: eventID}
}

// DriverError is a run failure a driver reports: Code is an error event
// code (provider_error, timeout, auth, …) and Message is safe for users.
type DriverError struct {
	Code    string
	Message string
}

func (e *DriverError) Error() string { return e.Code + ": " + e.Message }

// Cancelled is the end a driver reports when the runtime it drives
// cancelled the run on its own (stopped by another client of that runtime,
// say): the executor writes the terminal cancelled event with Reason, as for
// a user's cancel. Reason must be safe for users.
type Cancelled struct {
	Reason string
}

func (e *Cancelled) Error() string { return "cancelled: " + e.Reason }

// Remote delivers controls to runs that execute in another process (a
// runner, another hub replica).
type Remote interface {
	// Control delivers c to the executor that owns the run and returns its
	// answer; owned is false when no executor owns the run (never claimed,
	// or its executor is gone).
	Control(ctx context.Context, runID string, c RemoteControl) (res protocol.ControlResult, owned bool, err error)
}

// RemoteControl is one control for a run's executor.
type RemoteControl struct {
	Op       string `json:"op"`                  // cancel, approve, clarify, steer
	PromptID string `json:"prompt_id,omitempty"` // approval or clarify id
	Answer   string `json:"answer,omitempty"`    // choice, response or steer text
}
