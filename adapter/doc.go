// Package adapter is the RuntimeAdapter of the Hermes run-adapter contract:
// the one seam through which the hub starts runs and routes controls
// (cancel, approval, clarify, queue, goal) to whoever executes them. The hub
// translates; it never owns an agent loop.
//
// It owns the contract and its routing, not execution:
//
//   - RuntimeAdapter, the errors (ErrNotFound, ErrConflict, ErrClosed,
//     ErrBusy), Result, Store (what the hub and the executor need of the
//     journal), NewID, and Observe (a run's events from the journal, replay
//     then live);
//   - Router, the RuntimeAdapter the hub uses. Starts and session changes
//     (queue, goal) go to the executor of this process (Local, implemented
//     by adapter/executor). A control of a run reads the run's meta once and
//     goes to the local executor when the run executes in this process,
//     else to the Remote (adapter/runner: the node holding the run's lease),
//     else to Unowned: a cancel of a run that never started ends it with one
//     cancelled event; a started run whose executor is gone is left to the
//     lease reaper ("will end as interrupted"). A steer (QueueMessage mode
//     steer) is routed the same way, to the session's active run; the
//     Router alone keeps its idempotency key, whichever executor runs it.
//
// Drivers do not import this package: what they use is adapter/driver; the
// executor is adapter/executor; the runner (adapter/runner) moves
// execution to other processes.
//
// The Router holds no state of its own: every method is safe for
// concurrent use, as the Local and Remote it is given must be.
package adapter
