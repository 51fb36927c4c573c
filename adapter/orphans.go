package adapter

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// OrphanStopper is an optional Driver capability: stopping the upstream
// work of a run a previous process left executing (killed, it could not
// stop it). Recover calls it for each run it ends as interrupted, in the
// background: it never holds up start-up.
type OrphanStopper interface {
	// StopOrphan stops what the run started upstream, as far as the run's
	// journal tells, best effort; ctx bounds it. It logs what it did.
	StopOrphan(ctx context.Context, run Orphan) error
}

// Orphan is a run Recover ended as interrupted.
type Orphan struct {
	RunID     string
	SessionID string
	Request   protocol.StartRunRequest
	log       journal.Log
}

// Events calls fn with the run's journaled events in seq order, until fn
// returns an error (which Events returns).
func (o Orphan) Events(ctx context.Context, fn func(protocol.Envelope) error) error {
	return journal.ReadAll(ctx, o.log, o.RunID, 0, fn)
}

// Bounds of the orphan stops Recover starts.
const (
	maxOrphanStops   = 4                // at once
	orphanStopBudget = 30 * time.Second // each, on top of the driver's own bound
)

// stopOrphan hands a run Recover interrupted to its driver's StopOrphan,
// when the driver has one, in a goroutine Close stops and waits for.
func (a *InProcess) stopOrphan(r journal.RunMeta) {
	var req protocol.StartRunRequest
	if err := json.Unmarshal(r.Request, &req); err != nil {
		a.opts.Logger.Warn("cannot stop the upstream work of an interrupted run: its request does not decode", "run_id", r.ID, "err", err)
		return
	}
	_, drv, err := a.driver(req)
	if err != nil {
		// The hub's drivers changed since the run started: whatever it
		// started upstream is left going, and the operator should know.
		a.opts.Logger.Warn("cannot stop the upstream work of an interrupted run: its driver is not configured any more", "run_id", r.ID, "err", err)
		return
	}
	s, ok := drv.(OrphanStopper)
	if !ok {
		return
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		select {
		case a.orphans <- struct{}{}:
			defer func() { <-a.orphans }()
		case <-a.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(a.ctx, orphanStopBudget)
		defer cancel()
		if err := s.StopOrphan(ctx, Orphan{RunID: r.ID, SessionID: r.SessionID, Request: req, log: a.store}); err != nil {
			a.opts.Logger.Warn("could not stop the upstream work of an interrupted run", "run_id", r.ID, "err", journal.RedactString(err.Error()))
		}
	}()
}
