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
