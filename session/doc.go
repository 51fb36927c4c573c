// Package session is runhub's domain model: it folds a run's events into
// the run's state (status, pending approval or clarify prompt, available
// controls, progress, token count, usage, title, terminal state) and derives
// a session's SessionStatus from its runs.
//
// Everything here is a pure function of the events applied: no I/O, no
// clocks, no goroutines. A Run or Session value is not safe for concurrent
// mutation; callers that share one guard it.
package session
