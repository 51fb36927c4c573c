package runner

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/redistest"
)

// A renewal extends this node's leases and finds lost those that lapsed
// or that another node holds now (it took the run while this node was cut
// off from Redis): it neither brings a lapsed lease back nor takes
// another node's over.
func TestLeases_RenewOnlyOwn(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: s.Socket()})
	defer rdb.Close()
	cfg := Config{Client: rdb, Prefix: "lt:", LeaseTTL: 10 * time.Second}
	cfg.defaults()
	l := &leases{cfg: cfg, node: "a", owned: map[string]struct{}{}, wake: func() {}}
	ctx := context.Background()
	for _, id := range []string{"mine", "lapsed", "taken"} {
		if err := l.claim(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Del(ctx, cfg.lease("lapsed"))
	rdb.Set(ctx, cfg.lease("taken"), "b", 10*time.Second) // lapsed, then claimed by b
	rdb.PExpire(ctx, cfg.lease("mine"), time.Second)
	lost, err := l.renew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, id := range lost {
		got[id] = true
	}
	if len(lost) != 2 || !got["lapsed"] || !got["taken"] {
		t.Fatalf("lost %v, want lapsed and taken", lost)
	}
	if v := rdb.Get(ctx, cfg.lease("taken")).Val(); v != "b" {
		t.Fatalf("b's lease is %q's after a's renewal", v)
	}
	if n := rdb.Exists(ctx, cfg.lease("lapsed")).Val(); n != 0 {
		t.Fatal("a lapsed lease came back")
	}
	if ttl := rdb.PTTL(ctx, cfg.lease("mine")).Val(); ttl < 5*time.Second {
		t.Fatalf("a's own lease was not renewed: ttl %v", ttl)
	}
}
