package memshare_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/memshare"
)

var (
	_ hub.SocketCounter = (*memshare.Counter)(nil)
	_ hub.PresenceStore = (*memshare.Presence)(nil)
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Claims are counted over every hub's counter, once per socket, up to the
// limit; a release frees a slot.
func TestCounter(t *testing.T) {
	s := memshare.New()
	a, b := s.Counter(), s.Counter()
	ctx := context.Background()
	claim := func(c *memshare.Counter, id string, want bool) {
		t.Helper()
		if ok, err := c.Claim(ctx, "alice", id, 2); err != nil || ok != want {
			t.Fatalf("Claim(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
	claim(a, "1", true)
	claim(a, "1", true) // the same socket, counted once
	claim(b, "2", true)
	claim(b, "3", false)
	if ok, _ := a.Claim(ctx, "bob", "4", 2); !ok {
		t.Fatal("another subject was refused")
	}
	a.Release("alice", "1")
	claim(b, "3", true)
}

// A hub reads every hub's entries; another hub's put is announced to its
// subscription (its own is not); a closed handle withdraws its entries;
// cancel stops the subscription's goroutine.
func TestPresence(t *testing.T) {
	s := memshare.New()
	a, b := s.Presence(), s.Presence()
	ctx := context.Background()
	var mu sync.Mutex
	var heard []string
	cancel := b.Subscribe(func(target string) {
		mu.Lock()
		heard = append(heard, target)
		mu.Unlock()
	})
	defer cancel()
	if err := b.Put(ctx, map[string][]byte{"s:1": []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, map[string][]byte{"s:1": []byte("a")}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, []string{"s:1", "s:2"})
	if err != nil {
		t.Fatal(err)
	}
	entries := []string{}
	for _, e := range got["s:1"] {
		entries = append(entries, string(e))
	}
	slices.Sort(entries)
	if !slices.Equal(entries, []string{"a", "b"}) || len(got["s:2"]) != 0 {
		t.Fatalf("Get = %q", got)
	}
	a.Close()
	got, _ = b.Get(ctx, []string{"s:1"})
	if len(got["s:1"]) != 1 || string(got["s:1"][0]) != "b" {
		t.Fatalf("after a's Close: %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := slices.Clone(heard)
		mu.Unlock()
		if slices.Equal(n, []string{"s:1", "s:1"}) { // a's put, a's withdrawal; never b's own
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b heard %q; want a's two announcements", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	cancel() // twice is harmless
}
