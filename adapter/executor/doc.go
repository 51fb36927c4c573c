// Package executor executes runs in this process: InProcess (built with
// New and Options) picks a run's driver (its profile, else its provider),
// registers the run, journals run.started, runs the driver in a goroutine
// it owns and writes the run's single terminal event (done, cancelled or
// error) — retried until the journal takes it. It also owns what follows a
// run in its session: the queue (enqueue, drain), the standing goal
// (updateGoal, the post-turn evaluation and its continuation runs) and the
// session's title.
//
// It implements adapter.Local, the executor the adapter's Router drives:
// Control acts only on runs executing here and answers executing=false for
// any other, so a control that came from another process (adapter/runner's
// node calls Control directly) is never sent back out. With
// Options.Dispatch set, starts are handed to the run queue instead;
// runners Adopt them.
//
// Recover ends the runs a previous process left open as interrupted, and
// hands each to its driver's StopOrphan when the driver has one — but for
// a run whose driver can re-attach it (driver.Reattacher: the Hermes
// driver, whose runs go on upstream), which executes here again, resumed
// from the journal (reattach.go). Abandon stops a run whose lease lapsed;
// Close stops every run (each ends interrupted; with Options.Detach, a
// run its driver can re-attach is left going upstream without a terminal
// event instead) and waits for them and for the orphan stops.
//
// Concurrency: all methods are safe for concurrent use. Every goroutine
// (one per executing run, one per orphan stop, bounded) belongs to the
// InProcess and ends by Close.
package executor
