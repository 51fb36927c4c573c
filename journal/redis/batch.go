package redis

import (
	"context"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/protocol"
)

// appendReq is one Append waiting in the batcher.
type appendReq struct {
	ctx  context.Context
	e    protocol.Envelope // prepared
	key  string
	done chan struct{} // closed when reply or err is set

	reply []any
	err   error
}

// batcher is group commit for appends: concurrent Appends queue up and
// Options.Flushers goroutines each take what is waiting (up to MaxBatch
// events, MaxBatchBytes of payload) and journal it with one EVALSHA of
// append.lua (one per shard on a Redis Cluster, in flight together). A lone append goes out at once as a batch of one; under load
// the batches grow by themselves while earlier ones are in flight, so
// Redis runs one script (and the client one round trip) per batch instead
// of per event.
type batcher struct {
	s *Store

	mu       sync.Mutex
	cond     *sync.Cond // signalled when queue grows, a batch ends or closed is set
	queue    []*appendReq
	inflight int // batches being executed (≤ Options.Flushers)
	closed   bool
	wg       sync.WaitGroup
}

func (b *batcher) start(s *Store) {
	b.s = s
	b.cond = sync.NewCond(&b.mu)
	for range s.opts.Flushers {
		b.wg.Go(b.loop)
	}
}

// submit journals r: at once on the caller's goroutine when nothing waits
// and a batch slot is free (a lone append pays no hand-off), else through
// the queue. It returns false when the batcher is closed.
func (b *batcher) submit(r *appendReq) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	if len(b.queue) == 0 && b.inflight < b.s.opts.Flushers {
		b.inflight++
		b.mu.Unlock()
		b.exec([]*appendReq{r})
		b.done()
		return true
	}
	b.queue = append(b.queue, r)
	b.cond.Signal()
	b.mu.Unlock()
	return true
}

// done frees a batch slot.
func (b *batcher) done() {
	b.mu.Lock()
	b.inflight--
	switch {
	case b.closed:
		b.cond.Broadcast() // close waits for inflight to reach 0
	case len(b.queue) > 0:
		b.cond.Signal()
	}
	b.mu.Unlock()
}

// close refuses new appends and waits until every queued or running one
// is journaled.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	b.wg.Wait()
	b.mu.Lock()
	for b.inflight > 0 {
		b.cond.Wait()
	}
	b.mu.Unlock()
}

func (b *batcher) loop() {
	for {
		b.mu.Lock()
		for (len(b.queue) == 0 || b.inflight >= b.s.opts.Flushers) && !(b.closed && len(b.queue) == 0) {
			b.cond.Wait()
		}
		if len(b.queue) == 0 {
			b.mu.Unlock()
			return
		}
		b.inflight++
		batch := b.take()
		if len(b.queue) > 0 {
			b.cond.Signal() // another flusher takes the rest meanwhile
		}
		b.mu.Unlock()
		b.exec(batch)
		b.done()
	}
}

// take removes the next batch from the queue (b.mu held).
func (b *batcher) take() []*appendReq {
	n, size := 0, 0
	for n < len(b.queue) && n < b.s.opts.MaxBatch {
		sz := len(b.queue[n].e.Payload)
		if n > 0 && size+sz > b.s.opts.MaxBatchBytes {
			break
		}
		size += sz
		n++
	}
	batch := make([]*appendReq, n)
	copy(batch, b.queue)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}

// exec journals a batch: one run of append.lua per group (groupAppends).
func (b *batcher) exec(batch []*appendReq) {
	s := b.s
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("journal/redis: append: %w", err) // never sent
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	groups := s.groupAppends(live)
	switch {
	case len(groups) == 1:
		s.execGroup(groups[0])
	case s.opts.WaitReplicas > 0:
		// Each group waits for its own master's replicas.
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Go(func() { s.execGroup(g) })
		}
		wg.Wait()
	default:
		s.execGroups(groups)
	}
}

// execGroups journals several groups (a Cluster: one per shard) with one
// pipeline, which go-redis splits per node: one round trip to each master
// involved, one connection each. A script missing on a node (NOSCRIPT: a
// replica promoted since Open) is run again with its source.
func (s *Store) execGroups(groups [][]*appendReq) {
	ctx := context.Background() // as in execGroup
	cmds := make([]*goredis.Cmd, len(groups))
	cmdArgs := make([][2]any, len(groups))
	pipe := s.rdb.Pipeline()
	for i, g := range groups {
		keys, args := s.appendCommand(g)
		cmdArgs[i] = [2]any{keys, args}
		cmds[i] = appendScript.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, g := range groups {
		reply, err := cmds[i].Slice()
		if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			reply, err = s.runAppend(ctx, cmdArgs[i][0].([]string), cmdArgs[i][1].([]any))
		}
		s.deliverReplies(g, reply, err)
	}
}

// groupAppends splits a batch into the groups that one script may journal
// together: one per shard on a Cluster (a script's keys must share a slot),
// one in all on a single Redis.
func (s *Store) groupAppends(batch []*appendReq) [][]*appendReq {
	if !s.cluster {
		return [][]*appendReq{batch}
	}
	var groups [][]*appendReq
	at := make(map[int]int, 4) // shard → index in groups
	for _, r := range batch {
		n := s.k.shardOf(r.e.SessionID)
		i, ok := at[n]
		if !ok {
			i = len(groups)
			at[n] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// execGroup journals one group of appends with one run of append.lua and
// hands each Append its reply.
func (s *Store) execGroup(live []*appendReq) {
	keys, args := s.appendCommand(live)
	// Not the callers' contexts: the batch is shared, and a caller that
	// gives up only stops waiting.
	reply, err := s.runAppend(context.Background(), keys, args)
	s.deliverReplies(live, reply, err)
}

// deliverReplies hands each Append of a group its reply.
func (s *Store) deliverReplies(live []*appendReq, reply []any, err error) {
	if err == nil && len(reply) != len(live) {
		err = fmt.Errorf("unexpected reply: %d results for %d appends", len(reply), len(live))
	}
	for i, r := range live {
		if err != nil {
			r.err = s.fail("append", err)
		} else if rr, ok := reply[i].([]any); ok && len(rr) > 0 {
			r.reply = rr
			if r.e.Type.IsDelta() {
				s.marks.delta(&r.e)
			}
		} else {
			r.err = fmt.Errorf("journal/redis: append: unexpected reply %v", reply[i])
		}
		close(r.done)
	}
}

// runAppend runs append.lua (see waitAppend for Options.WaitReplicas).
func (s *Store) runAppend(ctx context.Context, keys []string, args []any) ([]any, error) {
	if s.opts.WaitReplicas > 0 {
		return s.waitAppend(ctx, keys, args)
	}
	return appendScript.Run(ctx, s.rdb, keys, args...).Slice()
}

// appendCommand builds the KEYS and ARGV of one run of append.lua. The
// batch's reply cache key is new each time: a resend of the same command
// (by go-redis) reuses it, a new batch never does.
func (s *Store) appendCommand(batch []*appendReq) ([]string, []any) {
	keys := make([]string, 0, 1+8*len(batch))
	args := make([]any, 0, 3+8*len(batch))
	keys = append(keys, s.k.batch(s.k.shardOf(batch[0].e.SessionID), newToken()))
	args = append(args, s.opts.FeedMaxLen, int64(max(s.opts.ReplyCacheTTL/time.Second, 1)), s.opts.FeedInterval.Seconds())
	for _, r := range batch {
		e := &r.e
		n := s.k.shardOf(e.SessionID)
		keys = append(keys, s.k.run(n, e.RunID), s.k.events(n, e.RunID), s.k.idem(n, e.RunID),
			s.k.session(n, e.SessionID), s.k.feed(n), s.k.active(n), s.k.ended(n), s.k.outbox(n))
		args = append(args, e.RunID, e.SessionID, string(e.Type), formatTime(e.CreatedAt),
			flag(e.Terminal), []byte(e.Payload), r.key, flag(e.Type.IsDelta()))
	}
	return keys, args
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
