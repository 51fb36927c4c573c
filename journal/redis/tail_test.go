package redis

import (
	goredis "github.com/redis/go-redis/v9"

	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// Many subscribed runs share one blocking read on one connection, and
// every subscriber gets exactly its run, in order.
func TestRunTail_ManyRunsOneConnection(t *testing.T) {
	s := openStore(t, Options{})
	c := admin(t)
	const runs, each = 200, 3
	subs := make([]*events, runs)
	for i := range runs {
		mkRun(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i))
		subs[i] = &events{}
		defer s.SubscribeRun(fmt.Sprint("r", i), subs[i].add)()
	}
	waitFor(t, 5*time.Second, "the run tail to block", func() bool { return clientsRunning(t, c, "xread") == 1 })
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Go(func() {
			for i := w; i < runs; i += 20 {
				appendN(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i), each)
			}
		})
	}
	wg.Wait()
	for i, sub := range subs {
		waitFor(t, 10*time.Second, fmt.Sprintf("delivery to r%d", i), func() bool { return sub.len() >= each })
	}
	time.Sleep(20 * time.Millisecond)
	for i, sub := range subs {
		wantSeqs(t, fmt.Sprint("r", i), sub.seqs(), 1, each)
		for _, e := range sub.l {
			if e.RunID != fmt.Sprint("r", i) {
				t.Fatalf("subscriber of r%d got an event of %s", i, e.RunID)
			}
		}
	}
	if n := clientsRunning(t, c, "xread"); n != 1 {
		t.Fatalf("%d connections are reading streams for %d subscribed runs, want 1", n, runs)
	}
	if st, size := s.rdb.PoolStats(), s.rdb.(*goredis.Client).Options().PoolSize; st.TotalConns > uint32(size) {
		t.Fatalf("pool holds %d connections (size %d)", st.TotalConns, size)
	}
}

// A subscription to a new run wakes the blocked read at once: delivery
// does not wait for Options.Block.
func TestRunTail_WakesOnNewSubscription(t *testing.T) {
	s := openStore(t, Options{Block: time.Minute})
	c := admin(t)
	mkRun(t, s, "sa", "ra")
	mkRun(t, s, "sb", "rb")
	var a, b events
	defer s.SubscribeRun("ra", a.add)()
	waitFor(t, 5*time.Second, "the run tail to block", func() bool { return clientsRunning(t, c, "xread") == 1 })
	appendN(t, s, "sa", "ra", 1)
	waitFor(t, 5*time.Second, "delivery on ra", func() bool { return a.len() == 1 })

	defer s.SubscribeRun("rb", b.add)()
	appendN(t, s, "sb", "rb", 2)
	// Without the wake the read would sleep a minute with rb outside it.
	waitFor(t, 10*time.Second, "delivery on rb", func() bool { return b.len() == 2 })
	wantSeqs(t, "rb", b.seqs(), 1, 2)
}

// A subscriber that joins behind the position the tail reads a run from
// (SubscribeRun's fallback when its lookup fails) catches up without a gap
// while the other subscribers see nothing twice.
func TestRunTail_LateJoinerCatchesUp(t *testing.T) {
	s := openStore(t, Options{})
	mkRun(t, s, "s1", "r1")
	appendN(t, s, "s1", "r1", 5)
	var ahead, behind events
	defer s.SubscribeRun("r1", ahead.add)()
	appendN(t, s, "s1", "r1", 2)
	waitFor(t, 5*time.Second, "the first subscriber", func() bool { return ahead.len() == 2 })
	defer s.runs.add(context.Background(), &runSub{runID: "r1", fn: behind.add, last: 0}, s.k.shardOf("s1"), true)()
	appendN(t, s, "s1", "r1", 3)
	waitFor(t, 5*time.Second, "both subscribers", func() bool { return ahead.len() == 5 && behind.len() == 10 })
	time.Sleep(20 * time.Millisecond)
	wantSeqs(t, "ahead", ahead.seqs(), 6, 10)
	wantSeqs(t, "behind", behind.seqs(), 1, 10)
}

// The feed carries every run's events, delta events without payload.
func TestFeed_DeltaWithoutPayload(t *testing.T) {
	s := openStore(t, Options{Shards: 3})
	var feed events
	defer s.SubscribeFeed(feed.add)()
	ctx := context.Background()
	for i := range 6 {
		sid, rid := fmt.Sprint("s", i), fmt.Sprint("r", i)
		mkRun(t, s, sid, rid)
		for _, e := range []protocol.Envelope{token(sid, rid, "secret-free text"), status(sid, rid), done(sid, rid)} {
			if _, err := s.Append(ctx, e, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, 5*time.Second, "the feed", func() bool { return feed.len() == 18 })
	byRun := map[string][]protocol.Envelope{}
	for _, e := range feed.l {
		byRun[e.RunID] = append(byRun[e.RunID], e)
	}
	for rid, l := range byRun {
		if len(l) != 3 || l[0].Seq != 1 || l[1].Seq != 2 || l[2].Seq != 3 {
			t.Fatalf("feed of %s: %+v", rid, l)
		}
		if string(l[0].Payload) != "{}" || l[0].Type != protocol.EventTokenDelta {
			t.Fatalf("feed token.delta of %s has payload %s, want {}", rid, l[0].Payload)
		}
		if string(l[1].Payload) == "{}" || !l[2].Terminal || l[2].SessionID == "" {
			t.Fatalf("feed of %s lost state: %+v", rid, l[1:])
		}
	}
}

// Close ends both tails at once, whatever Options.Block, and leaves no
// goroutine behind.
func TestClose_PromptAndNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := Open(context.Background(), Options{URL: srv.URL(), Prefix: fmt.Sprintf("close%d:", prefixes.Add(1)), Block: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mkRun(t, s, "s1", "r1")
	var r, f events
	s.SubscribeRun("r1", r.add)
	s.SubscribeFeed(f.add)
	appendN(t, s, "s1", "r1", 3)
	waitFor(t, 5*time.Second, "delivery", func() bool { return r.len() == 3 && f.len() == 3 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if n, _ := admin(t).Exists(context.Background(), s.wakeKey(0)).Result(); n != 0 {
		t.Fatal("Close left its wake stream behind")
	}
}

// Tails survive a Redis restart: they reconnect and resume from their last
// ids, so nothing journaled is skipped or delivered twice (AOF keeps it).
func TestTails_ResumeAfterRedisRestart(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{AOF: true})
	s := openStore(t, Options{URL: rs.URL(), Block: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	mkRun(t, s, "s1", "r1")
	var run, feed events
	defer s.SubscribeRun("r1", run.add)()
	defer s.SubscribeFeed(feed.add)()
	appendN(t, s, "s1", "r1", 5)
	waitFor(t, 5*time.Second, "delivery before the restart", func() bool { return run.len() == 5 && feed.len() == 5 })

	rs.Restart(t)
	ctx := context.Background()
	for i := 0; i < 5; {
		if _, err := s.Append(ctx, token("s1", "r1", "after"), fmt.Sprint("after-", i)); err != nil {
			time.Sleep(20 * time.Millisecond) // the pool redials
			continue
		}
		i++
	}
	waitFor(t, 10*time.Second, "delivery after the restart", func() bool { return run.len() >= 10 && feed.len() >= 10 })
	time.Sleep(50 * time.Millisecond)
	wantSeqs(t, "run subscriber", run.seqs(), 1, 10)
	wantSeqs(t, "feed subscriber", feed.seqs(), 1, 10)
}
