// Package ratelimit is a token bucket that also says when to warn about
// its refusals and when they amount to a flood: a tab socket's message
// rate limit.
package ratelimit

import "time"

// Bucket holds burst tokens refilled at rate per second. A nil *Bucket
// is no limit. It is not safe for concurrent use: one reader owns it.
type Bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
	window      time.Time // start of the current one-second refusal window
	refused     int       // messages refused in the window
}

// New returns a full bucket, or nil (no limit) when rate is not positive.
func New(rate float64, burst int, now time.Time) *Bucket {
	if rate <= 0 {
		return nil
	}
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// Rate is the refill rate per second (0 for no limit).
func (b *Bucket) Rate() float64 {
	if b == nil {
		return 0
	}
	return b.rate
}

// Take spends one token. A refusal reports warn for the first refusal of
// a one-second window (one warning per second, not one per message) and
// flood once more than burst were refused in it.
func (b *Bucket) Take(now time.Time) (ok, warn, flood bool) {
	if b == nil {
		return true, false, false
	}
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, false, false
	}
	if now.Sub(b.window) >= time.Second {
		b.window, b.refused, warn = now, 0, true
	}
	b.refused++
	return false, warn, float64(b.refused) > b.burst
}
