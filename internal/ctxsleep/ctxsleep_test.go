package ctxsleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepWaitsTheDuration(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if got := time.Since(start); got < 20*time.Millisecond {
		t.Fatalf("Sleep returned after %v, before its 20ms", got)
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep of an hour did not end when its context was cancelled")
	}
}

func TestSleepNonPositive(t *testing.T) {
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) on a live context: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, -time.Second, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep(%v) on a cancelled context: %v, want context.Canceled", d, err)
		}
	}
}

// A Sleeper's pauses each last their own duration, one cut short by its
// context included: a pause that ended early leaves nothing that ends the
// next one early.
func TestSleeperPauses(t *testing.T) {
	var s Sleeper
	defer s.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(1h) on a cancelled context: %v", err)
	}
	if err := s.Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0): %v", err)
	}
	for _, d := range []time.Duration{15 * time.Millisecond, time.Millisecond, 20 * time.Millisecond} {
		start := time.Now()
		if err := s.Sleep(context.Background(), d); err != nil {
			t.Fatalf("Sleep(%v): %v", d, err)
		}
		if got := time.Since(start); got < d {
			t.Fatalf("Sleep(%v) returned after %v", d, got)
		}
	}
	// A pause whose timer fired unread (its context ended at the same time)
	// does not end the next one at once.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel2() }()
	s.Sleep(ctx2, 5*time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	start := time.Now()
	if err := s.Sleep(context.Background(), 20*time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("pause after a raced one: %v after %v, want 20ms", err, time.Since(start))
	}
}
