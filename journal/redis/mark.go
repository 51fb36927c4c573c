package redis

import (
	"context"
	"sync"
	"time"

	"github.com/runhub/runhub/protocol"
)

// marker puts on the feed, with mark.lua, the deltas append.lua left out
// of it (Options.FeedInterval) that no later record of their run carried:
// a run whose last delta appended through this Store is an interval old
// gets one mark (nothing when append.lua left nothing out), so a status
// built from the feed never lags behind a quiet run by more than about
// two intervals. One goroutine, owned by the Store, started only with a
// FeedInterval.
type marker struct {
	s    *Store
	mu   sync.Mutex
	runs map[string]markRun // run id → its shard and last delta's append
}

type markRun struct {
	shard int
	at    time.Time
}

func (m *marker) start(s *Store) {
	m.s = s
	if s.opts.FeedInterval <= 0 {
		return
	}
	m.runs = map[string]markRun{}
	s.wg.Go(m.loop)
}

// delta notes a delta appended (and perhaps left out of the feed).
func (m *marker) delta(e *protocol.Envelope) {
	if m.runs == nil {
		return
	}
	n := m.s.k.shardOf(e.SessionID)
	now := time.Now()
	m.mu.Lock()
	m.runs[e.RunID] = markRun{shard: n, at: now}
	m.mu.Unlock()
}

func (m *marker) loop() {
	tick := time.NewTicker(max(m.s.opts.FeedInterval/4, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.s.ctx.Done():
			return
		case now := <-tick.C:
			m.flush(now)
		}
	}
}

// flush marks the runs quiet for an interval: one script per shard, all
// in one pipeline.
func (m *marker) flush(now time.Time) {
	due := map[int][]string{}
	m.mu.Lock()
	for id, r := range m.runs {
		if now.Sub(r.at) >= m.s.opts.FeedInterval {
			due[r.shard] = append(due[r.shard], id)
			delete(m.runs, id)
		}
	}
	m.mu.Unlock()
	if len(due) == 0 {
		return
	}
	s := m.s
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	for n, ids := range due {
		keys := make([]string, 0, 1+len(ids))
		args := make([]any, 0, 1+len(ids))
		keys = append(keys, s.k.feed(n))
		args = append(args, s.opts.FeedMaxLen)
		for _, id := range ids {
			keys = append(keys, s.k.run(n, id))
			args = append(args, id)
		}
		markScript.Eval(ctx, pipe, keys, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil && s.ctx.Err() == nil {
		// Not lost: the run's next record carries the count.
		s.opts.Logger.Warn("journal/redis: feed marks", "err", err)
	}
}
