package redis

import (
	"context"
	"errors"
	"slices"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/protocol"
)

// runTail multiplexes every SubscribeRun of a Store onto one goroutine that
// reads all subscribed run streams, plus the Store's wake stream, in one
// XREAD BLOCK on one dedicated connection. A subscription that adds a run
// to the set appends to the wake stream, so the blocked read returns and the
// next one includes the new stream. Unsubscribing does not wake: the run
// simply drops out of the next read (at the latest after Options.Block).
type runTail struct {
	s       *Store
	wakeKey string

	mu      sync.Mutex
	subs    map[string][]*runSub // by run id
	started bool
}

// runSub is one SubscribeRun.
type runSub struct {
	runID string
	fn    func(protocol.Envelope)

	mu        sync.Mutex // held while fn runs, so cancel waits for it
	cancelled bool

	// last is the seq of the last event this subscriber has (or had at
	// subscription time). Set before the sub is registered, then read and
	// written only by the tail goroutine.
	last uint64
}

func (t *runTail) init(s *Store) {
	t.s = s
	t.wakeKey = s.k.wake(newToken())
	t.subs = make(map[string][]*runSub)
}

func (t *runTail) isStarted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

// SubscribeRun calls fn with every event appended to runID after
// SubscribeRun returns, in seq order, each once. It first looks up the
// run's last seq (one round trip): the subscription starts there, so
// "subscribe, then Read" loses nothing. If that lookup fails (Redis
// unreachable) the subscription starts at the run's first event instead:
// more than asked for, never less.
//
// fn runs on the Store's run tail goroutine and must not block. cancel may
// be called from any goroutine but fn's own (it waits for a running fn).
func (s *Store) SubscribeRun(runID string, fn func(protocol.Envelope)) (cancel func()) {
	if s.closed.Load() {
		return func() {}
	}
	sub := &runSub{runID: runID, fn: fn}
	ctx, stop := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer stop()
	if last, err := s.rdb.HGet(ctx, s.k.run(runID), "last_seq").Uint64(); err == nil {
		sub.last = last
	} else if !errors.Is(err, goredis.Nil) && !s.closed.Load() {
		s.opts.Logger.Warn("journal/redis: subscribe: looking up the run's position; delivering from its first event",
			"run", runID, "err", err)
	}
	return s.runs.add(ctx, sub)
}

// add registers sub (its position set) and makes the tail read its run.
func (t *runTail) add(ctx context.Context, sub *runSub) (cancel func()) {
	s := t.s
	t.mu.Lock()
	newRun := len(t.subs[sub.runID]) == 0
	t.subs[sub.runID] = append(t.subs[sub.runID], sub)
	start := !t.started
	t.started = true
	t.mu.Unlock()
	switch {
	case start:
		if !s.goTail(t.loop) {
			return func() {}
		}
	case newRun:
		s.wake(ctx)
	}
	return func() { t.remove(sub) }
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
	} else {
		t.subs[sub.runID] = list
	}
}

// snapshot builds the XREAD arguments: the wake stream and every
// subscribed run's stream, each from the lowest position among its
// subscribers. It returns the stream key → run id map.
func (t *runTail) snapshot(wakeID string) ([]string, map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, 2*(len(t.subs)+1))
	ids := make([]string, 0, len(t.subs)+1)
	runs := make(map[string]string, len(t.subs))
	keys, ids = append(keys, t.wakeKey), append(ids, wakeID)
	for runID, subs := range t.subs {
		from := subs[0].last
		for _, sub := range subs[1:] {
			from = min(from, sub.last)
		}
		key := t.s.k.events(runID)
		keys, ids = append(keys, key), append(ids, entryID(from))
		runs[key] = runID
	}
	return append(keys, ids...), runs
}

// loop is the run tail goroutine.
func (t *runTail) loop() {
	s := t.s
	r := newTailReader(s, "run tail")
	defer r.close()
	wakeID := "0-0"
	for s.ctx.Err() == nil {
		streams, runs := t.snapshot(wakeID)
		res, ok := r.read(streams)
		if !ok {
			return
		}
		for _, st := range res {
			if st.Stream == t.wakeKey {
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
