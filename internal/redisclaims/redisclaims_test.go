package redisclaims

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The renewer renews every TTL/3 with a live context, stops for good, and
// exactly one of several concurrent Stops reports it stopped it.
func TestRenewer(t *testing.T) {
	var n atomic.Int32
	renewed := make(chan struct{}, 16)
	r := StartRenewer(30*time.Millisecond, func(ctx context.Context) {
		if ctx.Err() != nil {
			t.Error("renew got a context already done")
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Error("renew got a context without deadline")
		}
		n.Add(1)
		select {
		case renewed <- struct{}{}:
		default:
		}
	})
	for range 3 {
		select {
		case <-renewed:
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal within 10s")
		}
	}
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.Stop() {
				firsts.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := firsts.Load(); got != 1 {
		t.Fatalf("%d Stops reported they stopped the renewer, want 1", got)
	}
	after := n.Load()
	time.Sleep(100 * time.Millisecond)
	if got := n.Load(); got != after {
		t.Fatalf("renewed %d times after Stop", got-after)
	}
}

func TestDefaults(t *testing.T) {
	p, ttl, log := Defaults("", 0, 7*time.Second, nil)
	if p != "rh:" || ttl != 7*time.Second || log == nil {
		t.Fatalf("Defaults(zero) = %q, %v, %v", p, ttl, log)
	}
	p, ttl, _ = Defaults("x:", time.Second, 7*time.Second, nil)
	if p != "x:" || ttl != time.Second {
		t.Fatalf("Defaults(set) = %q, %v", p, ttl)
	}
}
