package webhook

import (
	"testing"
	"time"
)

// The schedule doubles from Min up to Max, and the jitter takes at most
// Jitter of each delay off, never adds to it.
func TestRetry_Delay(t *testing.T) {
	r := Retry{Min: 5 * time.Second, Max: time.Hour, Jitter: 0.5}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	for i, w := range want {
		if got := r.delay(i+1, func() float64 { return 0 }); got != w {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w)
		}
		if got := r.delay(i+1, func() float64 { return 0.999999 }); got <= w/2-time.Millisecond || got > w {
			t.Errorf("attempt %d with full jitter: %v, want in (%v, %v]", i+1, got, w/2, w)
		}
	}
	for _, n := range []int{11, 12, 50, 1000} {
		if got := r.delay(n, func() float64 { return 0 }); got != time.Hour {
			t.Errorf("attempt %d: %v, want the cap of 1h", n, got)
		}
	}
}

// The webhook-id depends on the event only: the same on every attempt,
// restart and replica, different for another event.
func TestMessageID(t *testing.T) {
	a, b, c := messageID("r_1", 7), messageID("r_1", 7), messageID("r_1", 8)
	if a != b || a == c || len(a) != len("msg_")+24 {
		t.Fatalf("ids %q %q %q", a, b, c)
	}
}
