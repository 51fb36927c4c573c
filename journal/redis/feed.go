package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// feedTail is the Store's status feed reader, partitioned by interest:
// the feed's partitions are the shards (a session's records are in its
// shard's feed stream), and a shard is read only while some subscriber
// watches one of its sessions, or every session (WatchAll). One reader
// goroutine per group of shards (one in all on a single Redis, one per
// shard on a Cluster), started with the group's first interest and idle —
// no Redis command at all — while its group has none; it reads its
// wanted shards (and its wake stream, so an interest or Close is seen at
// once) with XREAD BLOCK, from each shard's head at the moment it became
// wanted, and hands each record to every subscriber.
type feedTail struct {
	s *Store

	mu     sync.Mutex
	subs   []*feedSub
	shards []shardInterest // by shard
	all    int             // WatchAlls of every subscriber
	groups map[int]*feedGroup
}

// shardInterest is what the subscribers want of one shard.
type shardInterest struct {
	refs    int           // Watches of its sessions, every subscriber's
	covered bool          // read from a head taken since it became wanted
	ready   chan struct{} // closed once covered; nil while not wanted
	woken   bool          // a wake-up was written since it became wanted
}

// feedGroup is one reader's state.
type feedGroup struct {
	kick    chan struct{} // wakes the reader while idle
	reading bool          // in (or about to be in) a blocking read: wake it through Redis
}

type feedSub struct {
	fn        func(protocol.Envelope)
	mu        sync.Mutex // held while fn runs, so cancel waits for it
	cancelled bool
}

func (t *feedTail) init(s *Store) {
	t.s = s
	t.shards = make([]shardInterest, s.k.shards())
	t.groups = map[int]*feedGroup{}
}

// startedGroups returns the groups whose reader has started.
func (t *feedTail) startedGroups() map[int]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]bool{}
	for g := range t.groups {
		out[g] = true
	}
	return out
}

// wanted reports whether shard n is to be read. Called with t.mu held.
func (t *feedTail) wanted(n int) bool { return t.all > 0 || t.shards[n].refs > 0 }

// want marks shard n newly wanted: not covered until its reader has taken
// its head. Called with t.mu held, before the change that makes it wanted.
func (t *feedTail) want(n int) {
	if t.wanted(n) {
		return
	}
	t.shards[n] = shardInterest{ready: make(chan struct{})}
	g := t.s.groupOf(n)
	fg := t.groups[g]
	if fg == nil {
		fg = &feedGroup{kick: make(chan struct{}, 1)}
		if !t.s.goTail(func() { t.loop(g, fg) }) {
			return
		}
		t.groups[g] = fg
	}
	select {
	case fg.kick <- struct{}{}:
	default:
	}
}

// unwant forgets shard n's position once nobody wants it. Called with
// t.mu held, after the change.
func (t *feedTail) unwant(n int) {
	if !t.wanted(n) {
		t.shards[n] = shardInterest{}
	}
}

// SubscribeFeed calls fn with every event of every session journaled after
// SubscribeFeed returns, in seq order per run. Delta events
// (EventType.IsDelta) carry the payload "{}", and with a FeedInterval
// most come as journal.DeltasSkipped records. It reads every shard: a
// hub's status tracker subscribes with SubscribeInterest instead.
//
// fn runs on a feed tail goroutine of the Store (one call at a time per
// reader) and must not block. cancel may be called from any goroutine but
// fn's own (it waits for a running fn).
func (s *Store) SubscribeFeed(fn func(protocol.Envelope)) (cancel func()) {
	in := s.SubscribeInterest(fn)
	in.WatchAll()
	ctx, stop := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer stop()
	if err := in.Ready(ctx, ""); err != nil && !s.closed.Load() {
		// Redis is unreachable, so nothing is being journaled either: the
		// readers take the heads once they reconnect.
		s.opts.Logger.Warn("journal/redis: feed: reading the shard heads", "err", err)
	}
	return in.Cancel
}

// SubscribeInterest calls fn with the feed records of the shards that hold
// the sessions the Interest watches (every shard after a WatchAll): what
// each hub's status tracker reads, so that a hub reads the statuses of the
// sessions its tabs watch or focus and not the cluster's whole traffic;
// fn filters. See journal.Interest; fn runs as SubscribeFeed's does.
func (s *Store) SubscribeInterest(fn func(protocol.Envelope)) journal.Interest {
	in := &feedInterest{t: &s.feed, sub: &feedSub{fn: fn}, sessions: map[string]int{}}
	if s.closed.Load() {
		in.done = true
		return in
	}
	t := &s.feed
	t.mu.Lock()
	t.subs = append(t.subs, in.sub)
	t.mu.Unlock()
	return in
}

// feedInterest is one subscriber's interest (journal.Interest), guarded
// by the tail's mutex.
type feedInterest struct {
	t        *feedTail
	sub      *feedSub
	sessions map[string]int // sid → Watches
	all      int
	done     bool
}

func (in *feedInterest) Watch(sid string) {
	t := in.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if in.done {
		return
	}
	n := t.s.k.shardOf(sid)
	t.want(n)
	t.shards[n].refs++
	in.sessions[sid]++
}

func (in *feedInterest) Unwatch(sid string) {
	t := in.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if in.done || in.sessions[sid] == 0 {
		return
	}
	if in.sessions[sid]--; in.sessions[sid] == 0 {
		delete(in.sessions, sid)
	}
	n := t.s.k.shardOf(sid)
	t.shards[n].refs--
	t.unwant(n)
}

func (in *feedInterest) WatchAll() {
	t := in.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if in.done {
		return
	}
	for n := range t.shards {
		t.want(n)
	}
	t.all++
	in.all++
}

func (in *feedInterest) UnwatchAll() {
	t := in.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if in.done || in.all == 0 {
		return
	}
	in.all--
	t.all--
	for n := range t.shards {
		t.unwant(n)
	}
}

// Ready waits until the shard of sid (every shard for "") is read from a
// head taken after it became wanted; it wakes the shard's reader through
// Redis when the reader is in a blocking read.
func (in *feedInterest) Ready(ctx context.Context, sid string) error {
	t, s := in.t, in.t.s
	shards := allShards(s.k.shards())
	if sid != "" {
		shards = []int{s.k.shardOf(sid)}
	}
	var waits []chan struct{}
	wake := map[int]bool{}
	t.mu.Lock()
	for _, n := range shards {
		sh := &t.shards[n]
		if !t.wanted(n) || sh.covered {
			continue
		}
		waits = append(waits, sh.ready)
		g := s.groupOf(n)
		if fg := t.groups[g]; fg != nil && fg.reading && !sh.woken {
			sh.woken = true
			wake[g] = true
		}
	}
	t.mu.Unlock()
	for g := range wake {
		s.wake(ctx, g)
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return journal.ErrClosed
		}
	}
	return nil
}

func (in *feedInterest) Cancel() {
	t := in.t
	in.sub.mu.Lock()
	in.sub.cancelled = true
	in.sub.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if in.done {
		return
	}
	in.done = true
	if i := slices.Index(t.subs, in.sub); i >= 0 {
		t.subs = slices.Delete(t.subs, i, i+1)
	}
	for sid, c := range in.sessions {
		n := t.s.k.shardOf(sid)
		t.shards[n].refs -= c
		t.unwant(n)
	}
	t.all -= in.all
	for n := range t.shards {
		t.unwant(n)
	}
	in.sessions, in.all = nil, 0
}

func allShards(count int) []int {
	out := make([]int, count)
	for i := range out {
		out[i] = i
	}
	return out
}

// feedHeads returns the id of the newest entry of each of the shards
// ("0-0" for an empty one).
func (s *Store) feedHeads(shards []int) ([]string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer cancel()
	cmds := make([]*goredis.XMessageSliceCmd, len(shards))
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, n := range shards {
			cmds[i] = p.XRevRangeN(ctx, s.k.feed(n), "+", "-", 1)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	heads := make([]string, len(shards))
	for i, c := range cmds {
		heads[i] = "0-0"
		if v := c.Val(); len(v) > 0 {
			heads[i] = v[0].ID
		}
	}
	return heads, nil
}

// loop is the feed reader of group g: each turn it takes the heads of the
// shards newly wanted, then reads the wanted ones (and its wake stream)
// in one blocking XREAD; with none wanted it waits for a kick, reading
// nothing.
func (t *feedTail) loop(g int, fg *feedGroup) {
	s := t.s
	var shards []int
	for n := range s.k.shards() {
		if s.inGroup(n, g) {
			shards = append(shards, n)
		}
	}
	pos := map[int]string{}
	wakeID := "0-0"
	r := newTailReader(s, "feed tail", &s.reads.feedRecords, &s.reads.feedBytes)
	defer r.close()
	for s.ctx.Err() == nil {
		var read, need []int
		t.mu.Lock()
		for _, n := range shards {
			switch {
			case !t.wanted(n):
				delete(pos, n)
			case !t.shards[n].covered:
				need = append(need, n)
			default:
				read = append(read, n)
			}
		}
		fg.reading = len(read)+len(need) > 0
		t.mu.Unlock()
		if len(need) > 0 {
			heads, err := s.feedHeads(need)
			if err != nil {
				if !r.bo.wait(s.ctx) {
					return
				}
				continue
			}
			t.mu.Lock()
			for i, n := range need {
				pos[n] = heads[i]
				read = append(read, n)
				if sh := &t.shards[n]; t.wanted(n) && !sh.covered {
					sh.covered = true
					close(sh.ready)
				}
			}
			t.mu.Unlock()
		}
		if len(read) == 0 {
			select {
			case <-s.ctx.Done():
				return
			case <-fg.kick:
			}
			continue
		}
		keys := make([]string, 0, 2*len(read)+2)
		for _, n := range read {
			keys = append(keys, s.k.feed(n))
		}
		keys = append(keys, s.wakeKey(g))
		for _, n := range read {
			keys = append(keys, pos[n])
		}
		keys = append(keys, wakeID)
		res, ok := r.read(keys)
		if !ok {
			return
		}
		for _, st := range res {
			if len(st.Messages) == 0 {
				continue
			}
			last := st.Messages[len(st.Messages)-1].ID
			if st.Stream == s.wakeKey(g) {
				wakeID = last
				continue
			}
			for _, n := range read {
				if s.k.feed(n) == st.Stream {
					pos[n] = last
				}
			}
			t.deliver(st.Messages)
		}
	}
}

func (t *feedTail) deliver(msgs []goredis.XMessage) {
	t.mu.Lock()
	subs := slices.Clone(t.subs)
	t.mu.Unlock()
	if len(subs) == 0 {
		return
	}
	for _, m := range msgs {
		skipped, e, err := decodeFeedRecord(m.Values)
		if err != nil {
			t.s.opts.Logger.Error("journal/redis: feed tail: undecodable record; skipping it", "id", m.ID, "err", err)
			continue
		}
		for _, sub := range subs {
			if skipped != nil {
				sub.call(*skipped)
			}
			sub.call(e)
		}
	}
}

func (sub *feedSub) call(e protocol.Envelope) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if !sub.cancelled {
		sub.fn(e)
	}
}

// decodeFeedRecord rebuilds an envelope from a feed record: the fields of
// a run stream entry plus r (run id) and q (seq), or, for a session change
// (journal.SessionChanged), just s and t. A record that carries deltas
// append.lua left out (k, n, l, lc: Options.FeedInterval) comes with the
// journal.DeltasSkipped record that goes before it; a mark (mark.lua) is
// one.
func decodeFeedRecord(f map[string]any) (skipped *protocol.Envelope, e protocol.Envelope, err error) {
	str := func(k string) string { v, _ := f[k].(string); return v }
	if t := str("t"); t == string(journal.SessionChanged) {
		sid := str("s")
		if sid == "" {
			return nil, e, errors.New("session change record without a session")
		}
		return nil, journal.SessionChangedRecord(sid), nil
	}
	runID := str("r")
	seq, err := strconv.ParseUint(str("q"), 10, 64)
	if err != nil || runID == "" {
		return nil, e, fmt.Errorf("feed record without run or seq: r=%q q=%q", runID, str("q"))
	}
	if str("t") == string(journal.DeltasSkipped) {
		e, err := skippedRecord(runID, str("s"), seq, str("c"), f)
		return nil, e, err
	}
	if e, err = decodeEvent(runID, seq, f); err != nil {
		return nil, e, err
	}
	if _, ok := f["k"]; ok {
		sk, err := skippedRecord(runID, e.SessionID, seq-1, str("lc"), f)
		if err != nil {
			return nil, e, err
		}
		skipped = &sk
	}
	return skipped, e, nil
}

// skippedRecord is the journal.DeltasSkipped record of the deltas a feed
// record counts (k, n, l), the last of them at seq, created at created.
func skippedRecord(runID, sid string, seq uint64, created string, f map[string]any) (protocol.Envelope, error) {
	str := func(k string) string { v, _ := f[k].(string); return v }
	var p journal.SkippedDeltas
	var err1, err2, err3 error
	p.Count, err1 = strconv.ParseInt(str("k"), 10, 64)
	p.Tokens, err2 = strconv.ParseInt(str("n"), 10, 64)
	at, err3 := strconv.ParseFloat(created, 64)
	if err := errors.Join(err1, err2, err3); err != nil || p.Count <= 0 || sid == "" {
		return protocol.Envelope{}, fmt.Errorf("feed record of run %s: left-out deltas k=%q n=%q at %q: %v", runID, str("k"), str("n"), created, err)
	}
	p.Last = protocol.EventType(str("l"))
	payload, err := json.Marshal(p)
	if err != nil {
		return protocol.Envelope{}, err
	}
	return protocol.Envelope{Type: journal.DeltasSkipped, RunID: runID, SessionID: sid, Seq: seq, CreatedAt: at, Payload: payload}, nil
}
