package executor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

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
	_, drv, err := a.pick(req)
	if err != nil {
		// The hub's drivers changed since the run started: whatever it
		// started upstream is left going, and the operator should know.
		a.opts.Logger.Warn("cannot stop the upstream work of an interrupted run: its driver is not configured any more", "run_id", r.ID, "err", err)
		return
	}
	s, ok := drv.(driver.OrphanStopper)
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
		if err := s.StopOrphan(ctx, driver.NewOrphan(r, req, a.store)); err != nil {
			a.opts.Logger.Warn("could not stop the upstream work of an interrupted run", "run_id", r.ID, "err", journal.RedactString(err.Error()))
		}
	}()
}
