package executor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runhub/runhub/adapter"
	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// reattachCheck bounds a driver's Reattachable (a read of the run's
// journal) at Recover and at Close.
const reattachCheck = 10 * time.Second

// reattach executes here again a started run a previous process left
// open whose driver can re-attach it (driver.Reattacher): the run is
// claimed (Options.Claim), its Execution resumes from the journal and the
// driver's Reattach follows the upstream run; a run whose user was
// cancelling it is cancelled again. It reports whether it did; a run it
// did not re-attach is left to recoverRun (interrupted).
func (a *InProcess) reattach(ctx context.Context, r journal.RunMeta) bool {
	if r.LastSeq == 0 {
		return false // never started: nothing upstream to follow
	}
	var req protocol.StartRunRequest
	if json.Unmarshal(r.Request, &req) != nil {
		return false
	}
	_, drv, err := a.pick(req)
	if err != nil {
		return false
	}
	rd, ok := drv.(driver.Reattacher)
	if !ok {
		return false
	}
	o := driver.NewOrphan(r, req, a.store)
	cctx, cancel := context.WithTimeout(ctx, reattachCheck)
	can, err := rd.Reattachable(cctx, o)
	cancel()
	if err != nil {
		a.opts.Logger.Warn("cannot tell whether a run left open can be re-attached; ending it", "run_id", r.ID, "err", journal.RedactString(err.Error()))
		return false
	}
	if !can {
		return false
	}
	if a.opts.Claim != nil {
		if err := a.opts.Claim(ctx, r.ID); err != nil {
			a.opts.Logger.Warn("cannot claim a run left open to re-attach it", "run_id", r.ID, "err", err)
			return false
		}
	}
	x := driver.NewExecution(r.ID, r.SessionID, req, driver.ExecutionOptions{Log: a.store, Now: a.opts.Now,
		AppendRetry: a.opts.AppendRetry, ApprovalTimeout: a.opts.ApprovalTimeout, KeyScope: adapter.NewID("a"),
		Titled: func(ctx context.Context, title string) { a.adoptTitle(ctx, r.SessionID, title) }})
	cancelling, err := x.Resume(ctx)
	if err != nil {
		a.release(r.ID)
		a.opts.Logger.Warn("cannot read a run left open to re-attach it; ending it", "run_id", r.ID, "err", err)
		return false
	}
	var cause error
	if cancelling {
		cause = errUserCancel // the user's cancel outlives the restart
	}
	run := func(ctx context.Context, x *driver.Execution) (*protocol.Usage, error) { return rd.Reattach(ctx, x, o) }
	if !a.launch(x, drv, r.Owner, run, cause) {
		a.release(r.ID)
		return false
	}
	a.opts.Logger.Info("re-attached a run a previous process left executing", "run_id", r.ID, "session_id", r.SessionID, "cancelling", cancelling)
	return true
}

// detach stops, with driver.ErrDetached, those of runs (executing here,
// the executor closing) whose driver can re-attach them: each is left
// going upstream without a terminal event. The others end as Close ends
// them.
func (a *InProcess) detach(runs []*live) {
	for _, l := range runs {
		rd, ok := l.drv.(driver.Reattacher)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), reattachCheck)
		o := driver.NewOrphan(journal.RunMeta{ID: l.x.RunID, SessionID: l.x.SessionID}, l.x.Request, a.store)
		can, err := rd.Reattachable(ctx, o)
		cancel()
		if err == nil && can {
			l.cancel(driver.ErrDetached)
		}
	}
}
