package ratelimit

import (
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	if New(0, 5, time.Now()) != nil || New(-1, 5, time.Now()).Rate() != 0 {
		t.Fatal("a rate that is not positive is no limit")
	}
	var none *Bucket
	if ok, _, _ := none.Take(time.Now()); !ok {
		t.Fatal("no limit refused")
	}
	t0 := time.Unix(1000, 0)
	b := New(2, 3, t0)
	for i := range 3 { // the burst
		if ok, _, _ := b.Take(t0); !ok {
			t.Fatalf("message %d of the burst refused", i)
		}
	}
	// Refused: a warning for the first refusal of the window only, a
	// flood once more than burst (3) were refused in it.
	want := []struct{ warn, flood bool }{{true, false}, {false, false}, {false, false}, {false, true}}
	for i, w := range want {
		ok, warn, flood := b.Take(t0)
		if ok || warn != w.warn || flood != w.flood {
			t.Fatalf("refusal %d: ok %v warn %v flood %v, want false %v %v", i, ok, warn, flood, w.warn, w.flood)
		}
	}
	// Half a second refills one token at 2 per second.
	if ok, _, _ := b.Take(t0.Add(500 * time.Millisecond)); !ok {
		t.Fatal("not refilled")
	}
	if ok, _, _ := b.Take(t0.Add(500 * time.Millisecond)); ok {
		t.Fatal("refilled more than the rate")
	}
	// A new window warns again: at 1.1 s one token came back (0.6 s at 2
	// per second), the next message is refused with a warning.
	at := t0.Add(1100 * time.Millisecond)
	if ok, _, _ := b.Take(at); !ok {
		t.Fatal("not refilled at 1.1 s")
	}
	if ok, warn, _ := b.Take(at); ok || !warn {
		t.Fatalf("new window: ok %v warn %v", ok, warn)
	}
	// Never more than burst tokens, however long it rested.
	b.Take(t0.Add(time.Hour))
	n := 1
	for {
		if ok, _, _ := b.Take(t0.Add(time.Hour)); !ok {
			break
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d messages after a rest, want the burst of 3", n)
	}
}
