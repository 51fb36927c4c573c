package executor

import (
	"context"
	"time"

	"github.com/runhub/runhub/adapter/driver"
)

// A graceful stop has three steps: StopStarting (nothing new starts),
// WaitInterruptible (the runs executing here get the grace to finish),
// then Close (what still runs ends interrupted, or is left going upstream
// with Options.Detach).

// StopStarting makes the executor refuse new runs while the runs executing
// here go on: a start (StartRun, a queue or goal control that would start a
// run at once, Adopt) answers adapter.ErrClosed before it journals
// anything, and a run that ends starts nothing after it: its session's
// queued messages stay queued for the next process, whose Recover drains
// them (DrainIdle), and a goal's next turn is not taken. Controls of the
// runs executing here (cancel, approve, clarify, steer, queue behind them)
// are served as before. It cannot be undone; Close follows.
func (a *InProcess) StopStarting() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
}

// refusing reports whether the executor starts no more runs (StopStarting
// or Close).
func (a *InProcess) refusing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed || a.stopping
}

// Interruptible returns the number of runs executing here that Close would
// end as interrupted: every executing run, but for those it would leave
// going upstream (Options.Detach and a driver.Reattacher: a Hermes run).
func (a *InProcess) Interruptible() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, l := range a.live {
		if _, ok := l.drv.(driver.Reattacher); !ok || !a.opts.Detach {
			n++
		}
	}
	return n
}

// WaitInterruptible blocks until no run Close would end as interrupted
// executes here (Interruptible is 0), or ctx ends (then ctx's error). A
// run Close would leave going upstream is not waited for: the next process
// re-attaches it, so waiting would only delay the stop.
func (a *InProcess) WaitInterruptible(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for a.Interruptible() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
