package adapter

import (
	"context"
	"errors"
	"iter"
	"strings"

	"github.com/google/uuid"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// RuntimeAdapter is the contract's adapter surface. Control answers with a
// bounded ControlResult (accepted, not-active, expired, conflict,
// unsupported) and an error only for faults (ErrNotFound for an unknown
// run or session, or one that is not the control's owner's; storage
// failures).
type RuntimeAdapter interface {
	// StartRun starts a run in req.SessionID (a new session owned by owner
	// when empty). A session with an active run answers ErrConflict.
	StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error)
	// ObserveRun yields the run's events after afterSeq, then live ones, and
	// ends after the terminal event (or when ctx ends).
	ObserveRun(ctx context.Context, runID string, afterSeq uint64) iter.Seq2[protocol.Envelope, error]
	// GetRun reports the run's status.
	GetRun(ctx context.Context, runID string) (protocol.RunStatus, error)
	// Control executes one control (start, cancel, approve, clarify,
	// queue, steer, goal) for c.Owner.
	Control(ctx context.Context, c Control) (protocol.ControlResult, error)
}

// Errors of the adapter.
var (
	ErrNotFound = errors.New("adapter: not found")
	ErrConflict = errors.New("adapter: session has an active run")
	ErrClosed   = errors.New("adapter: closed")
	// ErrBusy answers a start when the executor runs as many runs as it may.
	ErrBusy = errors.New("adapter: too many runs executing")
)

// Result builds a ControlResult; Accepted follows status.
func Result(status, message, runID, sessionID, eventID string) protocol.ControlResult {
	return protocol.ControlResult{Accepted: status == protocol.ResultAccepted, Status: status,
		Message: message, RunID: runID, SessionID: sessionID, EventID: eventID}
}

// NewID returns a new time-ordered identifier with the given prefix.
func NewID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
}

// Local is the executor of this process as the Router drives it
// (adapter/executor implements it).
type Local interface {
	// StartRun begins a run and executes it here, or hands it to another
	// process (then answers status queued).
	StartRun(ctx context.Context, owner string, req protocol.StartRunRequest) (protocol.RunStartResult, error)
	// Control executes c. A control of a session (c.OfRun false: start,
	// queue, goal) is always executed here (executing is true). A control
	// of a run is delivered when the run executes in this process;
	// executing is false, and nothing was done, when it does not. run is
	// the run's meta as the caller read it (for a steer, its ID, SessionID
	// and Owner). It reads no run meta itself.
	Control(ctx context.Context, run journal.RunMeta, c Control) (res protocol.ControlResult, executing bool, err error)
}

// Remote delivers controls to runs that execute in another process (a
// runner, another hub replica).
type Remote interface {
	// Control delivers c, with run (the meta the caller read), to the
	// executor that owns the run and returns its answer; owned is false
	// when no executor owns the run (never claimed, or its executor is
	// gone).
	Control(ctx context.Context, run journal.RunMeta, c Control) (res protocol.ControlResult, owned bool, err error)
}
