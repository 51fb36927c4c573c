package redislimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/runhub/runhub/hub/redislimit"
	"github.com/runhub/runhub/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, rs *redistest.Server) *goredis.Client {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: rs.Socket()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func claim(t *testing.T, c *redislimit.Counter, subject, id string, limit int) bool {
	t.Helper()
	ok, err := c.Claim(context.Background(), subject, id, limit)
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	return ok
}

// Two hubs share one count per subject: the limit holds over both, a
// release frees a place on either, other subjects are counted apart, and
// no limit admits everything.
func TestCounter_LimitAcrossHubs(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	a := redislimit.New(client(t, rs), redislimit.Options{})
	defer a.Close()
	b := redislimit.New(client(t, rs), redislimit.Options{})
	defer b.Close()
	if !claim(t, a, "alice", "a1", 3) || !claim(t, a, "alice", "a2", 3) || !claim(t, b, "alice", "b1", 3) {
		t.Fatal("claims under the limit refused")
	}
	if claim(t, b, "alice", "b2", 3) || claim(t, a, "alice", "a3", 3) {
		t.Fatal("a fourth socket of alice admitted with a limit of 3 over two hubs")
	}
	if !claim(t, b, "bob", "b3", 3) {
		t.Fatal("bob refused for alice's sockets")
	}
	a.Release("alice", "a1")
	if !claim(t, b, "alice", "b2", 3) {
		t.Fatal("a released place was not given to the other hub")
	}
	for i := range 10 {
		if !claim(t, a, "carol", fmt.Sprint("c", i), 0) {
			t.Fatal("limit 0 refused a socket")
		}
	}
}

// Concurrent claims of one subject on several hubs never exceed the limit.
func TestCounter_ConcurrentClaimsNeverOvershoot(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	var hubs []*redislimit.Counter
	for range 4 {
		c := redislimit.New(client(t, rs), redislimit.Options{})
		defer c.Close()
		hubs = append(hubs, c)
	}
	const limit = 7
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if claim(t, hubs[i%len(hubs)], "alice", fmt.Sprint("s", i), limit) {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != limit {
		t.Fatalf("%d of 40 concurrent claims admitted, want exactly %d", n, limit)
	}
}

// A live hub renews its claims, so they outlast the TTL; a hub that stops
// (dies) without releasing them loses them after the TTL.
func TestCounter_RenewedOrLapsed(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	const ttl = time.Second // renewed every 333 ms: a lapse needs a renewal late by 667 ms
	live := redislimit.New(client(t, rs), redislimit.Options{TTL: ttl})
	defer live.Close()
	dead := redislimit.New(client(t, rs), redislimit.Options{TTL: ttl})
	if !claim(t, live, "alice", "l1", 2) || !claim(t, dead, "alice", "d1", 2) {
		t.Fatal("claims refused")
	}
	dead.Close() // no more renewals, no release: a crashed hub
	time.Sleep(3 * ttl)
	if !claim(t, live, "alice", "l2", 2) {
		t.Fatal("the dead hub's claim did not lapse")
	}
	if claim(t, live, "alice", "l3", 2) {
		t.Fatal("the live hub's renewed claim lapsed: a third socket was admitted")
	}
}
