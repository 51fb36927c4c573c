package sim

import (
	"testing"
	"time"
)

// TestPacer_CommitTimeDoesNotLowerTheRate: with token_ms 20 and appends
// that take 15 ms, tokens stay 20 ms apart (the wait shrinks to 5 ms)
// instead of 35 ms; a token far behind restarts the schedule rather than
// bursting.
func TestPacer_CommitTimeDoesNotLowerTheRate(t *testing.T) {
	const pause = 20 * time.Millisecond
	start := time.Unix(1000, 0)
	p := newPacer(start, pause)
	now := start
	for i := 1; i <= 50; i++ {
		now = now.Add(15 * time.Millisecond) // the append
		wait := p.next(now)
		if wait != 5*time.Millisecond {
			t.Fatalf("token %d: wait %v after a 15 ms append, want 5ms", i, wait)
		}
		now = now.Add(wait)
		if want := start.Add(time.Duration(i) * pause); !now.Equal(want) {
			t.Fatalf("token %d sent at +%v, want +%v", i, now.Sub(start), want.Sub(start))
		}
	}
	// A slow append (one pause late): no wait, the schedule holds.
	now = now.Add(30 * time.Millisecond)
	if wait := p.next(now); wait != 0 {
		t.Fatalf("late by 10ms: wait %v, want 0", wait)
	}
	// Far behind (a 200 ms stall): the schedule restarts at now, so the
	// next tokens are a pause apart, not a burst of ten.
	now = now.Add(200 * time.Millisecond)
	if wait := p.next(now); wait != 0 {
		t.Fatalf("after a stall: wait %v, want 0", wait)
	}
	if wait := p.next(now); wait != pause {
		t.Fatalf("token after a stall: wait %v, want %v (no burst)", wait, pause)
	}
}
