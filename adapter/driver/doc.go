// Package driver is what a runtime driver (adapter/sim, adapter/openai,
// adapter/execdrv, adapter/hermes) builds on: the Driver interface and its
// optional capabilities (Validator, Steerer, GoalJudge, OrphanStopper,
// Reattacher),
// the Execution a driver emits a run's events through, its prompts
// (Approval, Clarify and the pending forms), the session's Transcript (with
// each turn's attachments and its run's tool calls: AttachedTranscript;
// with the tool calls as text: ToolTranscript), and
// the ends a driver reports (Error, Cancelled).
//
// Guarantees to a driver: every event it emits is journaled (the journal
// assigns its seq) with an idempotency key, so a retried append never
// duplicates an event; terminal events are refused (the executor writes the
// run's single terminal event); streamed text is held back at word ends so
// that a secret streamed in pieces is redacted whole (holdback.go); each
// prompt is resolved exactly once, by the first answer or its expiry.
//
// A few Execution methods are the executor's and documented so
// (NewExecution, Append, Flush, BeginCancel, LastSeq, Steer, Resolve for a
// user's answer): adapter/executor builds an Execution per run, journals the
// run's first and terminal events through it, and delivers controls to it.
//
// Concurrency: an Execution is safe for concurrent use: a driver may emit
// from several goroutines while the executor delivers answers, steers and a
// cancel. Emit calls are journaled in the order they take its lock. The
// package starts one goroutine of its own, a timer per Execution that lets
// held-back text out after a pause; Flush (the executor's, at the run's end)
// stops it.
package driver
