package retry

import (
	"context"
	"testing"
	"time"
)

// The schedule doubles from Min up to Max, and the jitter takes at most
// Jitter of each delay off, never adds to it.
func TestDelay(t *testing.T) {
	b := Backoff{Min: 5 * time.Second, Max: time.Hour, Jitter: 0.5}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	for i, w := range want {
		if got := b.Delay(i+1, 0); got != w {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w)
		}
		if got := b.Delay(i+1, 0.999999); got <= w/2-time.Millisecond || got > w {
			t.Errorf("attempt %d with full jitter: %v, want in (%v, %v]", i+1, got, w/2, w)
		}
	}
	for _, n := range []int{11, 12, 50, 1000} {
		if got := b.Delay(n, 0); got != time.Hour {
			t.Errorf("attempt %d: %v, want the cap of 1h", n, got)
		}
	}
	if got := b.Delay(0, 0); got != 5*time.Second {
		t.Errorf("attempt 0: %v, want Min", got)
	}
	if got := (Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}).Delay(3, 0.9); got != 200*time.Millisecond {
		t.Errorf("no jitter, attempt 3: %v, want 200ms", got)
	}
}

// Sleep ends with its context, and reports it.
func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if (Backoff{Min: time.Hour, Max: time.Hour}).Sleep(ctx, 1) {
		t.Fatal("Sleep with an ended context reported a full wait")
	}
	if !(Backoff{Min: time.Microsecond, Max: time.Microsecond}).Sleep(context.Background(), 1) {
		t.Fatal("a short Sleep reported an ended context")
	}
}
