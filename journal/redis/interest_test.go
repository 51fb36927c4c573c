package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// sessionsInShards returns one session id per shard of the store, by shard.
func sessionsInShards(s *Store, prefix string) []string {
	out := make([]string, s.k.shards())
	for i, left := 0, len(out); left > 0; i++ {
		sid := fmt.Sprint(prefix, i)
		if n := s.k.shardOf(sid); out[n] == "" {
			out[n] = sid
			left--
		}
	}
	return out
}

// Two stores on one journal, each watching a session of its own shard:
// each reads the feed records of its shard only; a store that watches
// nothing reads no feed record; what is journaled after Ready reaches the
// watcher, and an Unwatch stops the reads.
func TestInterest_ReadsOnlyWatchedShards(t *testing.T) { readsOnlyWatchedShards(t, single(t)) }

// The same on a Redis Cluster: a reader per shard, each on its master.
func TestInterest_ReadsOnlyWatchedShards_Cluster(t *testing.T) {
	readsOnlyWatchedShards(t, clusterURL(t))
}

func readsOnlyWatchedShards(t *testing.T, url string) {
	a := openStore(t, Options{URL: url, Shards: 4, FeedInterval: time.Hour})
	b := openStore(t, Options{URL: url, Shards: 4, FeedInterval: time.Hour, Prefix: a.opts.Prefix})
	idle := openStore(t, Options{URL: url, Shards: 4, FeedInterval: time.Hour, Prefix: a.opts.Prefix})
	sids := sessionsInShards(a, "s")
	ctx := context.Background()
	var gotA, gotB, gotIdle events
	inA, inB := a.SubscribeInterest(gotA.add), b.SubscribeInterest(gotB.add)
	defer inA.Cancel()
	defer inB.Cancel()
	inIdle := idle.SubscribeInterest(gotIdle.add)
	defer inIdle.Cancel()
	inA.Watch(sids[0])
	inB.Watch(sids[1])
	for _, in := range []struct {
		i interface {
			Ready(context.Context, string) error
		}
		sid string
	}{{inA, sids[0]}, {inB, sids[1]}} {
		if err := in.i.Ready(ctx, in.sid); err != nil {
			t.Fatalf("Ready: %v", err)
		}
	}
	// Every shard streams: a status (at once) and 20 tokens (counted).
	for n, sid := range sids {
		rid := fmt.Sprint("r", n)
		mkRun(t, a, sid, rid)
		if _, err := a.Append(ctx, status(sid, rid), ""); err != nil {
			t.Fatal(err)
		}
		appendN(t, a, sid, rid, 20)
		if _, err := a.Append(ctx, done(sid, rid), ""); err != nil {
			t.Fatal(err)
		}
	}
	terminal := func(c *events, sid string) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.l {
			if e.SessionID == sid && e.Terminal {
				return true
			}
		}
		return false
	}
	waitFor(t, 10*time.Second, "a's run", func() bool { return terminal(&gotA, sids[0]) })
	waitFor(t, 10*time.Second, "b's run", func() bool { return terminal(&gotB, sids[1]) })
	for name, c := range map[string]*events{"a": &gotA, "b": &gotB} {
		want := sids[0]
		if name == "b" {
			want = sids[1]
		}
		c.mu.Lock()
		for _, e := range c.l {
			if e.SessionID != want {
				t.Errorf("store %s got a record of %s (another shard): %s %d", name, e.SessionID, e.Type, e.Seq)
			}
			if e.Type == protocol.EventTokenDelta {
				t.Errorf("store %s got a token delta: the feed carries them counted", name)
			}
		}
		c.mu.Unlock()
	}
	// a read its shard's records: the session change of the create and
	// the begin, status, the deltas counted (a record), done — 5, not 24.
	if st := a.ReadStats(); st.FeedRecords > 6 {
		t.Errorf("a read %d feed records, want its shard's (≤ 6)", st.FeedRecords)
	}
	if st := idle.ReadStats(); st.FeedRecords != 0 || st.FeedBytes != 0 || gotIdle.len() != 0 {
		t.Errorf("a store watching nothing read %d feed records (%d bytes), got %d", st.FeedRecords, st.FeedBytes, gotIdle.len())
	}
	// Unwatched, a's shard is read no more: once a watch of another shard
	// is ready, the reader reads without it.
	inA.Unwatch(sids[0])
	inA.Watch(sids[2])
	if err := inA.Ready(ctx, sids[2]); err != nil {
		t.Fatal(err)
	}
	gotA.mu.Lock()
	gotA.l = nil
	gotA.mu.Unlock()
	later := sessionsInShards(a, "later")[0] // in the unwatched shard
	mkRun(t, a, later, "r-later")
	if _, err := a.Append(ctx, done(later, "r-later"), ""); err != nil {
		t.Fatal(err)
	}
	if err := a.BeginRun(ctx, journal.RunMeta{ID: "r-marker", SessionID: sids[2]}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, done(sids[2], "r-marker"), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the marker", func() bool { return terminal(&gotA, sids[2]) })
	gotA.mu.Lock()
	defer gotA.mu.Unlock()
	for _, e := range gotA.l {
		if e.SessionID != sids[2] {
			t.Errorf("after its Unwatch, a got a record of %s: %s", e.SessionID, e.Type)
		}
	}
}

// Durable streams' notices go by interest: a store with a reader of a
// stream gets the notices of that stream's partition, not another's; a
// store with no reader gets none.
func TestInterest_StreamNoticesByPartition(t *testing.T) { streamNoticesByPartition(t, single(t)) }

// The same on a Redis Cluster: sharded channels, each on its master.
func TestInterest_StreamNoticesByPartition_Cluster(t *testing.T) {
	streamNoticesByPartition(t, clusterURL(t))
}

func streamNoticesByPartition(t *testing.T, url string) {
	a := openStore(t, Options{URL: url, Shards: 4})
	b := openStore(t, Options{URL: url, Shards: 4, Prefix: a.opts.Prefix})
	idle := openStore(t, Options{URL: url, Shards: 4, Prefix: a.opts.Prefix})
	byPart := map[int]string{}
	for i := 0; len(byPart) < 2; i++ {
		name := fmt.Sprint("stream-", i)
		if _, ok := byPart[a.k.notifyPartOf(name)]; !ok {
			byPart[a.k.notifyPartOf(name)] = name
		}
	}
	var mine, other string
	for _, name := range byPart {
		if mine == "" {
			mine = name
		} else {
			other = name
		}
	}
	woken := make(chan struct{}, 16)
	cancel := StreamStore{a}.SubscribeStream(mine, func() { woken <- struct{}{} })
	defer cancel()
	ctx := context.Background()
	StreamStore{b}.NotifyStream(ctx, other) // not a's partition
	StreamStore{b}.NotifyStream(ctx, mine)
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a's reader was not woken by b's commit")
	}
	if n := a.ReadStats().NotifyMessages; n != 1 {
		t.Errorf("a received %d notices, want 1 (its partition's)", n)
	}
	if n := idle.ReadStats().NotifyMessages; n != 0 {
		t.Errorf("a store with no reader received %d notices", n)
	}
}
