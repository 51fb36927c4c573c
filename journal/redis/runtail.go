package redis

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/protocol"
)

// runTail multiplexes every SubscribeRun of a Store onto one reader
// goroutine per group of shards (one in all on a single Redis, one per
// shard with subscriptions on a Cluster): each reads all subscribed run
// streams of its group, plus the group's wake stream, in one XREAD BLOCK.
// A subscription that adds a run to a group appends to the group's wake
// stream, so the blocked read returns and the next one includes the new
// stream. Unsubscribing does not wake: the run simply drops out of the next
// read (at the latest after Options.Block).
//
// A run's shard comes from its locator (see BeginRun). A subscription to a
// run that has no locator yet (it has not begun) waits in pending: a
// resolver goroutine looks the pending runs up every Options.Block until
// each has begun or lost its subscribers, and a BeginRun of this Store
// places its run at once.
type runTail struct {
	s *Store

	mu        sync.Mutex
	subs      map[string][]*runSub // by run id
	where     map[string]int       // shard of each subscribed run found
	readers   map[int]bool         // groups whose reader runs
	resolving bool                 // the resolver runs
}

// runSub is one SubscribeRun.
type runSub struct {
	runID string
	fn    func(protocol.Envelope)

	mu        sync.Mutex // held while fn runs, so cancel waits for it
	cancelled bool

	// last is the seq of the last event this subscriber has (or had at
	// subscription time). Set before the sub is registered, then read and
	// written only by the reader goroutine of the run's group.
	last uint64
}

func (t *runTail) init(s *Store) {
	t.s = s
	t.subs = make(map[string][]*runSub)
	t.where = make(map[string]int)
	t.readers = make(map[int]bool)
}

// startedGroups returns the groups whose reader has started.
func (t *runTail) startedGroups() map[int]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.readers)
}

// SubscribeRun calls fn with every event appended to runID after
// SubscribeRun returns, in seq order, each once. It first looks up the
// run's shard and last seq (a round trip or two): the subscription starts
// there, so "subscribe, then Read" loses nothing. If the run has not begun
// yet, or that lookup fails (Redis unreachable), the subscription starts at
// the run's first event instead: more than asked for, never less.
//
// fn runs on a run tail goroutine of the Store and must not block. cancel
// may be called from any goroutine but fn's own (it waits for a running
// fn).
func (s *Store) SubscribeRun(runID string, fn func(protocol.Envelope)) (cancel func()) {
	if s.closed.Load() {
		return func() {}
	}
	sub := &runSub{runID: runID, fn: fn}
	ctx, stop := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer stop()
	n, found, _, err := s.locate(ctx, runID)
	if err == nil && found {
		var last uint64
		if last, err = s.rdb.HGet(ctx, s.k.run(n, runID), "last_seq").Uint64(); err == nil {
			sub.last = last
		} else if errors.Is(err, goredis.Nil) {
			err = nil
		}
	}
	if err != nil && !s.closed.Load() {
		s.opts.Logger.Warn("journal/redis: subscribe: looking up the run's position; delivering from its first event",
			"run", runID, "err", err)
	}
	return s.runs.add(ctx, sub, n, found)
}

// add registers sub (its position set) and makes a reader read its run;
// known tells whether the run's shard n is known.
func (t *runTail) add(ctx context.Context, sub *runSub, n int, known bool) (cancel func()) {
	t.mu.Lock()
	t.subs[sub.runID] = append(t.subs[sub.runID], sub)
	var act placement
	_, placed := t.where[sub.runID]
	switch {
	case known:
		act = t.place(sub.runID, n)
	case !placed && !t.resolving:
		t.resolving = true
		act.resolve = true
	}
	t.mu.Unlock()
	if !t.act(ctx, act) {
		return func() {}
	}
	return func() { t.remove(sub) }
}

// placement is what placing a run takes: start a group's reader, wake it,
// or start the resolver.
type placement struct {
	start, wake bool
	group       int
	resolve     bool
}

// place records the shard of a subscribed run (t.mu held).
func (t *runTail) place(runID string, n int) placement {
	if _, ok := t.where[runID]; ok {
		return placement{}
	}
	t.where[runID] = n
	g := t.s.groupOf(n)
	if !t.readers[g] {
		t.readers[g] = true
		return placement{start: true, group: g}
	}
	return placement{wake: true, group: g}
}

// act carries a placement out; false when the Store is closed.
func (t *runTail) act(ctx context.Context, p placement) bool {
	switch {
	case p.start:
		return t.s.goTail(func() { t.loop(p.group) })
	case p.wake:
		t.s.wake(ctx, p.group)
	case p.resolve:
		return t.s.goTail(t.resolveLoop)
	}
	return true
}

// located tells the tail that runID begun in shard n (BeginRun of this
// Store), so that pending subscriptions to it are read at once.
func (t *runTail) located(runID string, n int) {
	t.mu.Lock()
	var act placement
	if len(t.subs[runID]) > 0 {
		act = t.place(runID, n)
	}
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.s.ctx, t.s.opts.Timeout)
	defer cancel()
	t.act(ctx, act)
}

// resolveLoop is the resolver goroutine: it reads the locators of the
// subscribed runs whose shard is unknown, every Options.Block, until there
// are none.
func (t *runTail) resolveLoop() {
	s := t.s
	for s.ctx.Err() == nil {
		t.mu.Lock()
		var ids []string
		for id := range t.subs {
			if _, ok := t.where[id]; !ok {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			t.resolving = false
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
		cmds := make([]*goredis.StringCmd, len(ids))
		_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.Get(ctx, s.k.loc(id))
			}
			return nil
		})
		if err != nil && !errors.Is(err, goredis.Nil) && s.ctx.Err() == nil {
			s.opts.Logger.Warn("journal/redis: run tail: looking up subscribed runs", "err", err)
		}
		for i, c := range cmds {
			n, perr := s.k.parseShard(c.Val())
			if c.Err() != nil || perr != nil {
				continue
			}
			t.mu.Lock()
			var act placement
			if len(t.subs[ids[i]]) > 0 {
				act = t.place(ids[i], n)
			}
			t.mu.Unlock()
			t.act(ctx, act)
		}
		cancel()
		timer := time.NewTimer(s.opts.Block)
		select {
		case <-s.ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
	}
	t.mu.Lock()
	t.resolving = false
	t.mu.Unlock()
}

func (t *runTail) remove(sub *runSub) {
	sub.mu.Lock()
	sub.cancelled = true
	sub.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.subs[sub.runID]
	if i := slices.Index(list, sub); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(t.subs, sub.runID)
		delete(t.where, sub.runID)
	} else {
		t.subs[sub.runID] = list
	}
}

// snapshot builds the XREAD arguments of group g: its wake stream and
// every subscribed run's stream of the group, each from the lowest
// position among its subscribers. It returns the stream key → run id map.
func (t *runTail) snapshot(g int, wakeKey, wakeID string) ([]string, map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := []string{wakeKey}
	ids := []string{wakeID}
	runs := make(map[string]string)
	for runID, n := range t.where {
		if !t.s.inGroup(n, g) {
			continue
		}
		subs := t.subs[runID]
		from := subs[0].last
		for _, sub := range subs[1:] {
			from = min(from, sub.last)
		}
		key := t.s.k.events(n, runID)
		keys, ids = append(keys, key), append(ids, entryID(from))
		runs[key] = runID
	}
	return append(keys, ids...), runs
}

// loop is the reader goroutine of group g.
func (t *runTail) loop(g int) {
	s := t.s
	r := newTailReader(s, "run tail", &s.reads.runRecords, &s.reads.runBytes)
	defer r.close()
	wakeKey := s.wakeKey(g)
	wakeID := "0-0"
	for s.ctx.Err() == nil {
		streams, runs := t.snapshot(g, wakeKey, wakeID)
		res, ok := r.read(streams)
		if !ok {
			return
		}
		for _, st := range res {
			if st.Stream == wakeKey {
				if n := len(st.Messages); n > 0 {
					wakeID = st.Messages[n-1].ID
				}
				continue
			}
			if runID, ok := runs[st.Stream]; ok {
				t.deliver(runID, st.Messages)
			}
		}
	}
}

// deliver hands entries of a run to its current subscribers. A subscriber
// takes an event only when it is the next seq it needs, so one that joined
// behind the others' position (see SubscribeRun) never sees a gap: it
// catches up from the next read, which starts at the lowest position.
func (t *runTail) deliver(runID string, msgs []goredis.XMessage) {
	t.mu.Lock()
	subs := slices.Clone(t.subs[runID])
	t.mu.Unlock()
	if len(subs) == 0 {
		return
	}
	for _, m := range msgs {
		seq, err := entrySeq(m.ID)
		if err != nil {
			t.s.opts.Logger.Error("journal/redis: run tail: bad entry id", "run", runID, "id", m.ID)
			continue
		}
		e, err := decodeEvent(runID, seq, m.Values)
		if err != nil {
			t.s.opts.Logger.Error("journal/redis: run tail: undecodable event; skipping it", "run", runID, "err", err)
		}
		for _, sub := range subs {
			if seq != sub.last+1 {
				continue
			}
			sub.last = seq
			if err == nil {
				sub.call(e)
			}
		}
	}
}

func (sub *runSub) call(e protocol.Envelope) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if !sub.cancelled {
		sub.fn(e)
	}
}
