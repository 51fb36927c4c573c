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

// feedTail is the Store's status feed reader: one goroutine per group of
// shards (one in all on a single Redis, one per shard on a Cluster) that
// reads the group's feed shards (and its wake stream, so Close is prompt)
// with XREAD BLOCK, from the shards' heads at the first SubscribeFeed on,
// and hands each record to every feed subscriber.
type feedTail struct {
	s *Store

	mu      sync.Mutex
	subs    []*feedSub
	started bool
}

type feedSub struct {
	fn        func(protocol.Envelope)
	mu        sync.Mutex // held while fn runs, so cancel waits for it
	cancelled bool
}

func (t *feedTail) init(s *Store) { t.s = s }

// startedGroups returns the groups whose reader has started.
func (t *feedTail) startedGroups() map[int]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]bool{}
	if t.started {
		for g := range t.s.groups() {
			out[g] = true
		}
	}
	return out
}

// SubscribeFeed calls fn with every event of every session journaled after
// SubscribeFeed returns, in seq order per run. Delta events
// (EventType.IsDelta) carry the payload "{}". The first subscription
// records the head of every shard (one pipeline) and starts the feed
// readers there; later ones join the running readers.
//
// fn runs on a feed tail goroutine of the Store (one call at a time) and
// must not block. cancel may be called from any goroutine but fn's own (it
// waits for a running fn).
func (s *Store) SubscribeFeed(fn func(protocol.Envelope)) (cancel func()) {
	if s.closed.Load() {
		return func() {}
	}
	t := &s.feed
	sub := &feedSub{fn: fn}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.subs = append(t.subs, sub)
	if !t.started {
		t.started = true
		heads, err := s.feedHeads(allShards(s.k.shards()))
		if err != nil && !s.closed.Load() {
			// Redis is unreachable, so nothing is being journaled either:
			// the readers take the heads once they reconnect.
			s.opts.Logger.Warn("journal/redis: feed: reading the shard heads", "err", err)
		}
		for g := range s.groups() {
			var own []string
			if heads != nil {
				for n := range s.k.shards() {
					if s.inGroup(n, g) {
						own = append(own, heads[n])
					}
				}
			}
			if !s.goTail(func() { t.loop(g, own) }) {
				return func() {}
			}
		}
	}
	return func() { t.remove(sub) }
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

func (t *feedTail) remove(sub *feedSub) {
	sub.mu.Lock()
	sub.cancelled = true
	sub.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.subs, sub); i >= 0 {
		t.subs = slices.Delete(t.subs, i, i+1)
	}
}

// loop is the feed reader of group g; heads is the position in each of the
// group's shards, nil when it must be read first.
func (t *feedTail) loop(g int, heads []string) {
	s := t.s
	var shards []int
	for n := range s.k.shards() {
		if s.inGroup(n, g) {
			shards = append(shards, n)
		}
	}
	keys := make([]string, 0, len(shards)+1)
	for _, n := range shards {
		keys = append(keys, s.k.feed(n))
	}
	keys = append(keys, s.wakeKey(g))
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	r := newTailReader(s, "feed tail", &s.reads.feedRecords, &s.reads.feedBytes)
	defer r.close()
	var ids []string
	if heads != nil {
		ids = append(heads, "0-0")
	}
	for s.ctx.Err() == nil {
		if ids == nil {
			heads, err := s.feedHeads(shards)
			if err != nil {
				if !r.bo.wait(s.ctx) {
					return
				}
				continue
			}
			ids = append(heads, "0-0")
		}
		res, ok := r.read(append(slices.Clone(keys), ids...))
		if !ok {
			return
		}
		for _, st := range res {
			i, ok := index[st.Stream]
			if !ok || len(st.Messages) == 0 {
				continue
			}
			ids[i] = st.Messages[len(st.Messages)-1].ID
			if i < len(shards) {
				t.deliver(st.Messages)
			}
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
