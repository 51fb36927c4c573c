package driver

import (
	"context"
	"errors"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Driver produces one run. Execute emits the run's events through x and
// returns when the run has finished: nil for success (the executor writes
// done with the returned usage), an *Error for a failure, a *Cancelled when
// the runtime cancelled the run on its own, or ctx's error when the run was
// cancelled or the executor is stopping. Execute must not emit terminal
// events (done, cancelled, terminal error).
type Driver interface {
	Execute(ctx context.Context, x *Execution) (*protocol.Usage, error)
}

// Validator is an optional Driver capability: checking a start request
// before the run begins, so bad input is refused without creating a run.
type Validator interface {
	Validate(req protocol.StartRunRequest) error
}

// Steerer is an optional Driver capability: guidance for a running run
// (queue mode steer) reaches it through Execution.Steering.
type Steerer interface {
	Steers() bool
}

// Error is a run failure a driver reports: Code is an error event code
// (provider_error, timeout, auth, …) and Message is safe for users.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Cancelled is the end a driver reports when the runtime it drives
// cancelled the run on its own (stopped by another client of that runtime,
// say): the executor writes the terminal cancelled event with Reason, as for
// a user's cancel. Reason must be safe for users.
type Cancelled struct {
	Reason string
}

func (e *Cancelled) Error() string { return "cancelled: " + e.Reason }

// Profile is the driver of one runtime profile (adapter/profile builds
// them; the executor picks one by a start's profile).
type Profile struct {
	Driver Driver
	Kind   string // the driver kind, journaled as run.started provider
	Model  string // run.started model of a start that names none
	// Judge decides after each turn whether the session's goal is
	// reached: the profile's goal_judge, else its own driver when that is
	// a GoalJudge. Nil (and a Driver that is no GoalJudge): the profile
	// cannot pursue a goal.
	Judge GoalJudge
	// GoalMaxTurns bounds the runs a goal starts on this profile (0: the
	// executor's default).
	GoalMaxTurns int
}

// OrphanStopper is an optional Driver capability: stopping the upstream
// work of a run a previous process left executing (killed, it could not
// stop it). The executor's Recover calls it for each run it ends as
// interrupted, in the background: it never holds up start-up.
type OrphanStopper interface {
	// StopOrphan stops what the run started upstream, as far as the run's
	// journal tells, best effort; ctx bounds it. It logs what it did.
	StopOrphan(ctx context.Context, run Orphan) error
}

// Reattacher is an optional Driver capability: following again a run a
// previous process left executing, when the run's work lives upstream and
// goes on without the hub (an external runtime: Hermes keeps running a run
// whose hub died). The executor's Recover hands such a run back to its
// driver instead of ending it interrupted, and an executor built to leave
// runs behind (executor.Options.Detach) stops them on Close with
// ErrDetached, writing no terminal event, so the next process re-attaches
// them. A run the driver cannot re-attach ends interrupted, as any other,
// and goes to StopOrphan.
type Reattacher interface {
	// Reattachable reports whether the run's journal holds what Reattach
	// needs (Hermes: the upstream run id). It reads, and calls, nothing
	// else; ctx bounds it.
	Reattachable(ctx context.Context, run Orphan) (bool, error)
	// Reattach follows the run again and returns as Execute does; x
	// journals after the run's earlier events (Execution.Resume). It
	// checks the upstream run first: one that is gone, or that waits on
	// something the journal never saw, ends with a clear error (and is
	// stopped upstream when it still runs). Its ctx ends as Execute's
	// does, ErrDetached included.
	Reattach(ctx context.Context, x *Execution, run Orphan) (*protocol.Usage, error)
}

// ErrDetached is the cause of a run's context when its executor stops and
// leaves the run to be re-attached by the next process (a Reattacher's run
// on a graceful shutdown): the driver lets go of the run without stopping
// its upstream work, and the executor journals no terminal event.
var ErrDetached = errors.New("the executor left the run to be re-attached")

// Detached reports whether ctx ended with ErrDetached.
func Detached(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrDetached) }

// Orphan is a run Recover ended as interrupted, or handed to a
// Reattacher.
type Orphan struct {
	RunID     string
	SessionID string
	Request   protocol.StartRunRequest
	log       journal.Log
}

// NewOrphan is the executor's: the orphan run of meta, whose request is req,
// read from log.
func NewOrphan(meta journal.RunMeta, req protocol.StartRunRequest, log journal.Log) Orphan {
	return Orphan{RunID: meta.ID, SessionID: meta.SessionID, Request: req, log: log}
}

// Events calls fn with the run's journaled events in seq order, until fn
// returns an error (which Events returns).
func (o Orphan) Events(ctx context.Context, fn func(protocol.Envelope) error) error {
	return journal.ReadAll(ctx, o.log, o.RunID, 0, fn)
}

// CapabilityReporter is an optional Driver capability: the runtime it
// drives says what it can do (Hermes' GET /v1/capabilities), and that
// answer, not a table, narrows the profile's capabilities
// (profile.Config.Capabilities). RuntimeCapabilities returns the
// protocol.Cap* names the runtime allows now; known is false while the
// driver has no answer and no fallback to give (nothing is narrowed then).
// It must not block for long: it is asked for every status a tab gets.
type CapabilityReporter interface {
	RuntimeCapabilities() (caps []string, known bool)
}
