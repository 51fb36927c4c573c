// Package ctxsleep is the one context-aware sleep of runhub: drivers,
// runners, the journal's Redis backoff and the load generator pause with
// it so that a cancelled context ends every pause at once.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep pauses for d or until ctx ends, whichever comes first. It returns
// ctx.Err() when ctx ended first (or had ended when d is not positive), nil
// when d passed. Its timer is stopped on return, so a cancelled long pause
// holds nothing.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// A Sleeper is Sleep with one timer for all its pauses, for a loop that
// pauses between many steps (a simulated run's tokens): no timer is made
// per pause. The zero value is ready; it is not safe for concurrent use.
// Stop it when done, so a long pause's timer holds nothing.
type Sleeper struct {
	t *time.Timer
}

// Sleep pauses as the package's Sleep does.
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if s.t == nil {
		s.t = time.NewTimer(d)
	} else {
		s.t.Reset(d) // since Go 1.23 no value of an earlier pause is left in C
	}
	select {
	case <-ctx.Done():
		s.t.Stop()
		return ctx.Err()
	case <-s.t.C:
		return nil
	}
}

// Stop stops the timer of a pause that ended early.
func (s *Sleeper) Stop() {
	if s.t != nil {
		s.t.Stop()
	}
}
