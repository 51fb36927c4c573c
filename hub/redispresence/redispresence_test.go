package redispresence

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/runhub/runhub/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, rs *redistest.Server) *goredis.Client {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: rs.Socket()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func get(t *testing.T, s *Store, target string) []string {
	t.Helper()
	m, err := s.Get(context.Background(), []string{target})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range m[target] {
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two hubs' entries of a target are both read; an empty entry withdraws
// one; the other hub hears of each change; renewal keeps an entry past its
// TTL, and the entry of a hub that stops renewing (died) lapses.
func TestStore_EntriesAcrossHubs(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	const ttl = 600 * time.Millisecond
	a := New(client(t, rs), Options{TTL: ttl})
	b := New(client(t, rs), Options{TTL: ttl})
	defer b.Close()
	var mu sync.Mutex
	var heard []string
	cancel := b.Subscribe(func(target string) {
		mu.Lock()
		heard = append(heard, target)
		mu.Unlock()
	})
	defer cancel()
	time.Sleep(100 * time.Millisecond) // the subscription is in place
	ctx := context.Background()
	if err := a.Put(ctx, map[string][]byte{"s:1": []byte(`{"alice":{"w":1}}`), "o:alice": []byte(`{"alice":{"w":2}}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, map[string][]byte{"s:1": []byte(`{"root":{"f":1}}`)}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, b, "s:1"); !reflect.DeepEqual(got, []string{`{"alice":{"w":1}}`, `{"root":{"f":1}}`}) {
		t.Fatalf("s:1 = %q", got)
	}
	waitFor(t, 5*time.Second, "b hears a's targets and not its own", func() bool {
		mu.Lock()
		defer mu.Unlock()
		h := slices.Clone(heard)
		slices.Sort(h)
		return reflect.DeepEqual(h, []string{"o:alice", "s:1"})
	})
	// Renewed, the entries outlive several TTLs.
	time.Sleep(3 * ttl)
	if got := get(t, b, "o:alice"); len(got) != 1 {
		t.Fatalf("o:alice after 3 TTLs of renewal: %q", got)
	}
	// Withdrawn: gone at once.
	a.Put(ctx, map[string][]byte{"o:alice": nil})
	if got := get(t, b, "o:alice"); len(got) != 0 {
		t.Fatalf("o:alice after withdrawal: %q", got)
	}
	// a dies without withdrawing (its renewal stops): its entry of s:1
	// lapses, b's stays.
	a.renewer.Stop()
	waitFor(t, 5*time.Second, "a's entry to lapse", func() bool {
		return reflect.DeepEqual(get(t, b, "s:1"), []string{`{"root":{"f":1}}`})
	})
}

// Close withdraws the hub's entries at once.
func TestStore_CloseWithdraws(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	a := New(client(t, rs), Options{})
	b := New(client(t, rs), Options{})
	defer b.Close()
	a.Put(context.Background(), map[string][]byte{"s:1": []byte(`{"alice":{"w":1}}`)})
	if got := get(t, b, "s:1"); len(got) != 1 {
		t.Fatalf("before close: %q", got)
	}
	a.Close()
	if got := get(t, b, "s:1"); len(got) != 0 {
		t.Fatalf("after close: %q", got)
	}
}
