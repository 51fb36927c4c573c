// Package adapter is the RuntimeAdapter of the Hermes run-adapter contract:
// the one seam through which the hub starts runs and routes controls
// (cancel, approval, clarify, queue, goal) to whoever executes them. The hub
// translates; it never owns an agent loop.
//
// InProcess is the backend that executes runs in goroutines it owns, through
// a Driver (adapter/sim is the scripted simulator). Every event a driver
// produces goes through the journal, which assigns its seq; the executor,
// not the driver, writes the run's single terminal event.
// Recover ends the runs a previous process left open as interrupted, and
// hands each to its driver's StopOrphan when the driver has one (the Hermes
// driver stops the Hermes run a killed hub left going).
//
// All methods are safe for concurrent use.
package adapter
