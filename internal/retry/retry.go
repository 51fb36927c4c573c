// Package retry is the one retry schedule of runhub: the webhook sender,
// the runner node's Redis reads, the Redis journal's tails and its WAIT
// appends all wait between attempts with a Backoff.
package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/runhub/runhub/internal/ctxsleep"
)

// Backoff is an exponential schedule: the wait after the n-th failed
// attempt is Min·2^(n-1), at most Max, less a random part of up to Jitter
// (0..1) of it, so waits never grow past the schedule and retries of many
// callers spread out.
type Backoff struct {
	Min, Max time.Duration
	Jitter   float64
}

// Delay is the wait after the n-th failed attempt (n ≥ 1; a smaller n is
// taken as 1), with r in [0, 1) the random draw the jitter scales.
func (b Backoff) Delay(n int, r float64) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d - time.Duration(float64(d)*b.Jitter*r)
}

// Sleep waits Delay(n, a random draw) or until ctx ends; false when ctx
// ended first.
func (b Backoff) Sleep(ctx context.Context, n int) bool {
	return ctxsleep.Sleep(ctx, b.Delay(n, rand.Float64())) == nil
}
