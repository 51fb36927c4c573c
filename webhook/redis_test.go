package webhook_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal/redis"
	"github.com/runhub/runhub/webhook"
)

// Two hubs on one Redis journal, each with a sender: every notification is
// sent by exactly one of them (the claim holder); when that one stops, the
// other takes over and sends what comes next, still once each.
func TestRedis_TwoHubsSendEachOnce(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	open := func() *redis.Store {
		s, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: "wh:", Block: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.EnableOutbox(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	rc := newReceiver(t, nil)
	type hub struct {
		s      *redis.Store
		sender *webhook.Sender
		leader *webhook.RedisLeader
	}
	var hubs []hub
	for i, s := range []*redis.Store{a, b} {
		l := webhook.NewRedisLeader(s.Client(), "wh:", "node-"+itoa(i), 600*time.Millisecond, slog.New(slog.DiscardHandler))
		sn, _, _, _ := startSender(t, s, webhook.Options{Leader: l}, endpoint(rc.srv.URL))
		l.Start()
		t.Cleanup(l.Stop)
		hubs = append(hubs, hub{s, sn, l})
	}
	eventually(t, "one hub holding the claim", func() bool { return hubs[0].leader.Leading() != hubs[1].leader.Leading() })

	// Notifications from both hubs' runs.
	const n = 10
	for i := range n {
		s := hubs[i%2].s
		sid, rid := "s"+itoa(i), "r"+itoa(i)
		newRun(t, s, sid, rid)
		approval(t, s, sid, rid)
	}
	eventually(t, "every notification acknowledged", func() bool { return len(rc.acked()) == n })
	time.Sleep(300 * time.Millisecond)
	check := func(want int) {
		t.Helper()
		if got := len(rc.requests()); got != want {
			t.Fatalf("%d requests for %d notifications: some were sent twice", got, want)
		}
		sent := 0
		for _, h := range hubs {
			sent += len(h.sender.Deliveries(100))
		}
		if sent != want {
			t.Fatalf("the hubs made %d attempts in all, want %d", sent, want)
		}
	}
	check(n)
	lead, standby := hubs[0], hubs[1]
	if !lead.leader.Leading() {
		lead, standby = standby, lead
	}
	if len(standby.sender.Deliveries(100)) != 0 {
		t.Fatalf("the standby hub sent")
	}

	// The sender hub stops (gives the claim up): the other sends from now on.
	lead.sender.Stop()
	lead.leader.Stop()
	for i := n; i < 2*n; i++ {
		sid, rid := "s"+itoa(i), "r"+itoa(i)
		newRun(t, lead.s, sid, rid)
		approval(t, lead.s, sid, rid)
	}
	eventually(t, "the standby taking over", func() bool { return len(rc.acked()) == 2*n })
	time.Sleep(300 * time.Millisecond)
	check(2 * n)
	if got := len(standby.sender.Deliveries(100)); got != n {
		t.Fatalf("the standby sent %d, want %d", got, n)
	}
	for id, k := range rc.acked() {
		if k != 1 {
			t.Fatalf("%s acknowledged %d times", id, k)
		}
	}
}
