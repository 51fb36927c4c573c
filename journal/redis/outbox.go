package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// The outbox: each shard has a stream <prefix>{T}:outbox to which
// append.lua adds every notable event (journal.Notable) in the same script
// run that journals it, fields r (run), s (session), q (seq), t (type); and
// a hash <prefix>{T}:outbox:state of the sender's state per entry. The
// stream exists only once EnableOutbox made it: a journal whose hubs send
// no notifications records none, whichever process (hub or runner) appends
// the event. The stream is capped near 100,000 entries (append.lua): a
// sender away for that long loses the oldest.

// EnableOutbox makes every shard's outbox stream, so that append.lua
// records notable events from now on, on every process sharing the
// journal. It is idempotent.
func (s *Store) EnableOutbox(ctx context.Context) error {
	for n := range s.k.shards() {
		key := s.k.outbox(n)
		if err := enableOutboxScript.Run(ctx, s.rdb, []string{key}).Err(); err != nil {
			return s.fail("enable outbox", err)
		}
	}
	return nil
}

// enableOutboxScript creates an empty stream unless there is one: XADD
// then XDEL of that entry leaves the stream, empty.
var enableOutboxScript = goredis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  local id = redis.call('XADD', KEYS[1], '*', 'init', '1')
  redis.call('XDEL', KEYS[1], id)
end
return 1`)

// OutboxList returns up to limit entries of the outbox: each shard's oldest
// first, shard after shard (webhook.Outbox).
func (s *Store) OutboxList(ctx context.Context, limit int) ([]journal.OutboxEntry, error) {
	var out []journal.OutboxEntry
	var empty []int
	defer func() { s.sweepOutboxStates(ctx, empty) }()
	for n := range s.k.shards() {
		if len(out) >= limit {
			break
		}
		msgs, err := s.rdb.XRangeN(ctx, s.k.outbox(n), "-", "+", int64(limit-len(out))).Result()
		if err != nil {
			return out, s.fail("outbox list", err)
		}
		if len(msgs) == 0 {
			empty = append(empty, n)
			continue
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.ID
		}
		states, err := s.rdb.HMGet(ctx, s.k.outboxState(n), ids...).Result()
		if err != nil {
			return out, s.fail("outbox list", err)
		}
		for i, m := range msgs {
			en := journal.OutboxEntry{ID: strconv.Itoa(n) + "/" + m.ID}
			en.RunID, _ = m.Values["r"].(string)
			en.SessionID, _ = m.Values["s"].(string)
			t, _ := m.Values["t"].(string)
			en.Type = protocol.EventType(t)
			q, _ := m.Values["q"].(string)
			en.Seq, _ = strconv.ParseUint(q, 10, 64)
			if st, ok := states[i].(string); ok {
				en.State = []byte(st)
			}
			out = append(out, en)
		}
	}
	return out, nil
}

// sweepOutboxStates drops the state hash of each empty outbox of shards:
// states of entries the stream's cap trimmed away would stay otherwise.
// One pipeline; a failure is left to the next list.
func (s *Store) sweepOutboxStates(ctx context.Context, shards []int) {
	if len(shards) == 0 || ctx.Err() != nil {
		return
	}
	_, _ = s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, n := range shards {
			sweepStateScript.Eval(ctx, p, []string{s.k.outbox(n), s.k.outboxState(n)})
		}
		return nil
	})
}

// sweepStateScript deletes KEYS[2] when the stream KEYS[1] is empty.
var sweepStateScript = goredis.NewScript(`
if redis.call('XLEN', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('DEL', KEYS[2])
end
return 1`)

// OutboxSave stores the sender's state of the entry id, unless the entry
// is gone.
func (s *Store) OutboxSave(ctx context.Context, id string, state []byte) error {
	n, sid, err := s.outboxID(id)
	if err != nil {
		return err
	}
	err = outboxSaveScript.Run(ctx, s.rdb, []string{s.k.outbox(n), s.k.outboxState(n)}, sid, state).Err()
	if err != nil {
		return s.fail("outbox save", err)
	}
	return nil
}

// outboxSaveScript sets the state only while the entry exists, so a
// save racing a delete leaves nothing behind.
var outboxSaveScript = goredis.NewScript(`
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return 1`)

// OutboxDelete removes the entry id and its state.
func (s *Store) OutboxDelete(ctx context.Context, id string) error {
	n, sid, err := s.outboxID(id)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.XDel(ctx, s.k.outbox(n), sid)
		p.HDel(ctx, s.k.outboxState(n), sid)
		return nil
	})
	if err != nil {
		return s.fail("outbox delete", err)
	}
	return nil
}

// outboxID splits an entry id "<shard>/<stream id>".
func (s *Store) outboxID(id string) (int, string, error) {
	ns, sid, ok := strings.Cut(id, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 0 || n >= s.k.shards() || sid == "" {
		return 0, "", fmt.Errorf("journal/redis: outbox id %q: %w", id, journal.ErrNotFound)
	}
	return n, sid, nil
}
