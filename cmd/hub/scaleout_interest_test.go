package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// createSession creates an empty session through p (the scale-out and
// the fault tests share it).
func createSession(t testing.TB, p *hubProcess) string {
	t.Helper()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "test"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	return sess.SessionID
}

// startIn starts a sim run in session sid through p.
func startIn(t testing.TB, p *hubProcess, sid, script string) protocol.RunStartResult {
	t.Helper()
	var run protocol.RunStartResult
	body := map[string]any{"message": "test", "metadata": map[string]any{"sim": jsonRaw(script)}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sid+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return run
}

// shardTag is the hash tag of the journal shard that holds sid, read from
// the keys on the server (which shard is the journal's business).
func (s *scaled) shardTag(sid string) string {
	s.t.Helper()
	ctx, pattern := context.Background(), "rh:{*}:sess:"+sid
	var keys []string
	var err error
	if c, ok := s.rdb.(*goredis.ClusterClient); ok {
		var mu sync.Mutex
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
			k, err := n.Keys(ctx, pattern).Result()
			mu.Lock()
			keys = append(keys, k...)
			mu.Unlock()
			return err
		})
	} else {
		keys, err = s.rdb.Keys(ctx, pattern).Result()
	}
	if err != nil || len(keys) != 1 {
		s.t.Fatalf("keys of session %s: %v %v", sid, keys, err)
	}
	tag, _, _ := strings.Cut(strings.TrimPrefix(keys[0], "rh:{"), "}")
	return tag
}

// redisReads is what a hub says it read from Redis (its /metrics).
type redisReads struct{ feed, feedBytes, run float64 }

func readsOf(t testing.TB, p *hubProcess) redisReads {
	body := scrapeURL(t, p.URL()+"/metrics")
	return redisReads{seriesValue(body, "runhub_redis_feed_read_records_total"),
		seriesValue(body, "runhub_redis_feed_read_bytes_total"),
		seriesValue(body, "runhub_redis_run_read_records_total")}
}

// feedLen is how many records shard tag's status feed holds.
func (s *scaled) feedLen(tag string) int64 {
	n, err := s.rdb.XLen(context.Background(), "rh:{"+tag+"}:bus").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// A hub reads from Redis what its tabs need and nothing else: two hubs
// whose tabs watch and focus two sessions in different shards each read
// the status feed of their own shard only (at status rate: a few records
// for a run of hundreds of tokens) and the events of their own focused
// run only — none of the other's tokens; a third hub with no tab reads
// nothing at all. What the tabs see is whole: every event of their run,
// and its final status with every token counted.
func TestScaleOut_ReadsFollowInterest(t *testing.T) {
	readsFollowInterest(t, newScaled(t, redistest.Options{}, 2*time.Second))
}

// The same on a Redis Cluster of 3 masters: each hub's feed readers read
// per shard, each on its master.
func TestScaleOut_ReadsFollowInterestCluster(t *testing.T) {
	s, _ := newClusterScaled(t, 1500*time.Millisecond, 2*time.Second)
	readsFollowInterest(t, s)
}

func readsFollowInterest(t *testing.T, s *scaled) {
	a, b, idle := s.hub("hubA"), s.hub("hubB"), s.hub("hubC")
	s.runner("r1")
	sa := createSession(t, a)
	sb := createSession(t, b)
	for s.shardTag(sb) == s.shardTag(sa) { // one chance in 16
		sb = createSession(t, b)
	}
	ta, tb := dialTab(t, a), dialTab(t, b)
	for _, x := range []struct {
		tab *tab
		sid string
	}{{ta, sa}, {tb, sb}} {
		x.tab.c.Watch(x.tab.ctx(), false, x.sid)
		x.tab.c.Focus(x.tab.ctx(), x.sid, "")
		x.tab.until(20*time.Second, "the watched session's status", func() bool { _, ok := x.tab.status[x.sid]; return ok })
	}
	beforeA, beforeB, beforeIdle := readsOf(t, a), readsOf(t, b), readsOf(t, idle)
	feedA, feedB := s.feedLen(s.shardTag(sa)), s.feedLen(s.shardTag(sb))

	const small, big = 40, 400
	ra := startIn(t, a, sa, `{"tokens":40,"token_ms":5,"tools":0}`)
	rb := startIn(t, b, sb, `{"tokens":400,"token_ms":2,"tools":0}`)
	ta.until(60*time.Second, "hub A's run", func() bool { return ta.terminal(ra.RunID) })
	tb.until(60*time.Second, "hub B's run", func() bool { return tb.terminal(rb.RunID) })
	checkDone(t, "tab on hub A", ta.run(ra.RunID), small)
	checkDone(t, "tab on hub B", tb.run(rb.RunID), big)
	for _, x := range []struct {
		tab    *tab
		sid    string
		tokens int64
	}{{ta, sa, small}, {tb, sb, big}} {
		x.tab.until(20*time.Second, "the final status", func() bool {
			st := x.tab.status[x.sid]
			return st.Terminal && st.Tokens == x.tokens
		})
	}
	afterA, afterB, afterIdle := readsOf(t, a), readsOf(t, b), readsOf(t, idle)
	addedA, addedB := s.feedLen(s.shardTag(sa))-feedA, s.feedLen(s.shardTag(sb))-feedB
	dA, dB := afterA.feed-beforeA.feed, afterB.feed-beforeB.feed
	t.Logf("feed records read: hub A %v (its shard got %d), hub B %v (its shard got %d); run events read: A %v, B %v; idle hub %v feed, %v run",
		dA, addedA, dB, addedB, afterA.run-beforeA.run, afterB.run-beforeB.run, afterIdle.feed-beforeIdle.feed, afterIdle.run-beforeIdle.run)
	// Each hub read its own shard's feed only: no more records than
	// that shard got (nothing of the other's), and the feed carried
	// tokens counted, not one record each.
	if dA < 1 || dA > float64(addedA) {
		t.Errorf("hub A read %v feed records; its shard got %d", dA, addedA)
	}
	if dB < 1 || dB > float64(addedB) {
		t.Errorf("hub B read %v feed records; its shard got %d", dB, addedB)
	}
	if addedB >= big/4 {
		t.Errorf("hub B's shard got %d feed records for a run of %d tokens: the feed is not at status rate", addedB, big)
	}
	// Run events: each hub its own run's (a replay and the live tail at
	// most), never the other's 400 tokens.
	if d := afterA.run - beforeA.run; d < small || d > 2*(small+10) {
		t.Errorf("hub A read %v run events; its run has about %d", d, small+5)
	}
	if d := afterB.run - beforeB.run; d < big {
		t.Errorf("hub B read %v run events; its run has about %d", d, big+5)
	}
	// No tab, no reads.
	if afterIdle.feed != beforeIdle.feed || afterIdle.run != beforeIdle.run || afterIdle.feed > 0 {
		t.Errorf("the hub with no tab read %v feed records and %v run events", afterIdle.feed, afterIdle.run-beforeIdle.run)
	}

	// Hub A dies; its tab reconnects to the hub that had none, which
	// now reads that session's shard: the status is right at once, and
	// a run started afterwards is followed through every transition.
	a.kill()
	tc := dialTab(t, idle)
	tc.c.Watch(tc.ctx(), false, sa)
	tc.until(20*time.Second, "the status on the hub taken over", func() bool {
		st := tc.status[sa]
		return st.RunID == ra.RunID && st.Terminal && st.Tokens == small
	})
	tc.c.Focus(tc.ctx(), sa, "")
	rc := startIn(t, b, sa, `{"tokens":30,"token_ms":5,"tools":0}`)
	tc.until(60*time.Second, "the next run on the hub taken over", func() bool { return tc.terminal(rc.RunID) })
	checkDone(t, "tab on hub C", tc.run(rc.RunID), 30)
	tc.until(20*time.Second, "the next run's final status", func() bool {
		st := tc.status[sa]
		return st.RunID == rc.RunID && st.Terminal && st.Tokens == 30
	})
	if st := readsOf(t, idle); st.feed < 1 || st.feed > float64(s.feedLen(s.shardTag(sa))) {
		t.Errorf("hub C read %v feed records; its one session's shard holds %d", st.feed, s.feedLen(s.shardTag(sa)))
	}
}
