// Package adapter is the RuntimeAdapter of the Hermes run-adapter contract:
// the one seam through which the hub starts runs and routes controls
// (cancel, approval, clarify, queue, goal) to whoever executes them. The hub
// translates; it never owns an agent loop.
//
// It owns the contract and its routing, not execution:
//
//   - RuntimeAdapter, Control (a control as one value: op, run or session,
//     owner, idempotency key and the op's payload), the errors
//     (ErrNotFound, ErrConflict, ErrClosed, ErrBusy), Result, NewID, and
//     Observe (a run's events from the journal, replay then live);
//   - Router, the RuntimeAdapter the hub uses. Starts and controls of a
//     session (queue, goal) go to the executor of this process (Local,
//     implemented by adapter/executor). A control of a run reads one meta
//     (the run's, or its session's when it names only the session), checks
//     the owner on it and goes, with that meta, to the local executor when
//     the run executes in this process, else to the Remote (adapter/runner:
//     the node holding the run's lease), else to Unowned: a cancel of a run
//     that never started ends it with one cancelled event; a started run
//     whose executor is gone is left to the lease reaper ("will end as
//     interrupted"). A steer (a queue in mode steer) is routed the same
//     way, to the session's active run; the Router alone keeps its
//     idempotency key, whichever executor runs it. Only the executor tells
//     the ops apart.
//
// Drivers do not import this package: what they use is adapter/driver; the
// executor is adapter/executor; the runner (adapter/runner) moves
// execution to other processes.
//
// The Router holds no state of its own: every method is safe for
// concurrent use, as the Local and Remote it is given must be.
package adapter
