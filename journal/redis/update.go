package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// sessionState is the runtime-owned part of a session, kept as one JSON
// field ("state") of its hash.
type sessionState struct {
	Queue      []journal.QueuedMessage      `json:"queue,omitempty"`
	Goal       *protocol.GoalUpdatedPayload `json:"goal,omitempty"`
	RecentKeys []string                     `json:"recent_keys,omitempty"`
}

// decodeSession builds a SessionMeta from its hash and run list.
func decodeSession(h map[string]string, runs []string) (journal.SessionMeta, error) {
	created, _ := strconv.ParseFloat(h["created_at"], 64)
	m := journal.SessionMeta{ID: h["id"], Owner: h["owner"], Title: h["title"], CreatedAt: created,
		Runs: append([]string{}, runs...), ActiveRun: h["active_run"]}
	if raw := h["state"]; raw != "" {
		var st sessionState
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return m, fmt.Errorf("journal/redis: session %s state: %w", m.ID, err)
		}
		m.Queue, m.Goal, m.RecentKeys = st.Queue, st.Goal, st.RecentKeys
	}
	return m, nil
}

// maxUpdateAttempts bounds the optimistic retries of UpdateSession.
const maxUpdateAttempts = 50

// UpdateSession changes a session's runtime-owned state (queue, goal,
// recent keys, title); see journal.SessionUpdater. It is optimistic: WATCH
// on the session hash, so a concurrent BeginRun or terminal append (which
// change active_run) makes it re-read and re-apply fn.
func (s *Store) UpdateSession(ctx context.Context, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	if err := s.check(); err != nil {
		return journal.SessionMeta{}, err
	}
	n := s.k.shardOf(id)
	key := s.k.session(n, id)
	var out journal.SessionMeta
	txf := func(tx *goredis.Tx) error {
		h, err := tx.HGetAll(ctx, key).Result()
		if err != nil {
			return err
		}
		if len(h) == 0 {
			return fmt.Errorf("journal/redis: session %s: %w", id, journal.ErrNotFound)
		}
		runs, err := tx.LRange(ctx, s.k.sessionRuns(n, id), 0, -1).Result()
		if err != nil {
			return err
		}
		m, err := decodeSession(h, runs)
		if err != nil {
			return err
		}
		if err := fn(&m); err != nil {
			return err
		}
		journal.RedactSession(&m)
		raw, err := json.Marshal(sessionState{Queue: m.Queue, Goal: m.Goal, RecentKeys: m.RecentKeys})
		if err != nil {
			return err
		}
		cmds, err := tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.HSet(ctx, key, "state", raw, "title", m.Title)
			if len(m.Queue) > 0 {
				p.SAdd(ctx, s.k.queued(n), id)
			} else {
				p.SRem(ctx, s.k.queued(n), id)
			}
			p.XAdd(ctx, &goredis.XAddArgs{Stream: s.k.feed(n), MaxLen: s.opts.FeedMaxLen, Approx: true,
				Values: []any{"s", id, "t", string(journal.SessionChanged)}})
			return nil
		})
		err = execAbortCause(cmds, err)
		if err == nil {
			out = m
		}
		return err
	}
	for range maxUpdateAttempts {
		err := s.rdb.Watch(ctx, txf, key)
		if errors.Is(err, goredis.TxFailedErr) {
			continue // the session changed under us: read it again
		}
		if err != nil {
			var pe *protocol.Error
			if errors.Is(err, journal.ErrNotFound) || errors.As(err, &pe) || !isRedisErr(err) {
				return journal.SessionMeta{}, err
			}
			return journal.SessionMeta{}, s.fail("update session", err)
		}
		return out, nil
	}
	return journal.SessionMeta{}, fmt.Errorf("journal/redis: update session %s: too much contention: %w", id, journal.ErrConflict)
}

// prepareUpdate reads session id of shard n and applies fn for
// BeginRunUpdate: it returns the session as fn left it and the arguments
// begin_run.lua checks and writes (ARGV[8..]); nil arguments when the
// session has an active run (fn is then not called).
func (s *Store) prepareUpdate(ctx context.Context, n int, id string, fn func(*journal.SessionMeta) error) (journal.SessionMeta, []any, error) {
	key := s.k.session(n, id)
	var h *goredis.MapStringStringCmd
	var runs *goredis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		h = p.HGetAll(ctx, key)
		runs = p.LRange(ctx, s.k.sessionRuns(n, id), 0, -1)
		return nil
	}); err != nil {
		return journal.SessionMeta{}, nil, err
	}
	if len(h.Val()) == 0 {
		return journal.SessionMeta{}, nil, fmt.Errorf("journal/redis: session %s: %w", id, journal.ErrNotFound)
	}
	m, err := decodeSession(h.Val(), runs.Val())
	if err != nil {
		return m, nil, err
	}
	if m.ActiveRun != "" {
		return m, nil, nil
	}
	if err := fn(&m); err != nil {
		return m, nil, err
	}
	journal.RedactSession(&m)
	raw, err := json.Marshal(sessionState{Queue: m.Queue, Goal: m.Goal, RecentKeys: m.RecentKeys})
	if err != nil {
		return m, nil, err
	}
	queued := "0"
	if len(m.Queue) > 0 {
		queued = "1"
	}
	return m, []any{"1", h.Val()["state"], h.Val()["title"], string(raw), m.Title, queued}, nil
}

// IdleQueues lists the sessions with queued messages and no active run
// (the shards' queued sets, then the sessions: two pipelines); members
// whose session is gone or has an empty queue are dropped from the sets.
// See journal.Queues.
func (s *Store) IdleQueues(ctx context.Context) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	sets := make([]*goredis.StringSliceCmd, s.k.shards())
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for n := range sets {
			sets[n] = p.SMembers(ctx, s.k.queued(n))
		}
		return nil
	}); err != nil {
		return nil, s.fail("idle queues", err)
	}
	type member struct {
		n  int
		id string
		c  *goredis.SliceCmd
	}
	var ms []member
	for n, set := range sets {
		for _, id := range set.Val() {
			ms = append(ms, member{n: n, id: id})
		}
	}
	if len(ms) == 0 {
		return nil, nil
	}
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range ms {
			ms[i].c = p.HMGet(ctx, s.k.session(ms[i].n, ms[i].id), "id", "active_run", "state")
		}
		return nil
	}); err != nil {
		return nil, s.fail("idle queues", err)
	}
	var out []string
	for _, m := range ms {
		v := m.c.Val()
		str := func(i int) string { s, _ := v[i].(string); return s }
		var st sessionState
		if str(2) != "" {
			_ = json.Unmarshal([]byte(str(2)), &st)
		}
		switch {
		case str(0) == "" || len(st.Queue) == 0:
			// Deleted, or emptied by a writer that predates the set: drop
			// it, unless a queue came back meanwhile (UpdateSession adds).
			dropQueuedScript.Run(ctx, s.rdb, []string{s.k.session(m.n, m.id), s.k.queued(m.n)}, m.id)
		case str(1) == "":
			out = append(out, m.id)
		}
	}
	return out, nil
}

// execAbortCause is the error of a MULTI/EXEC transaction: when Redis
// discarded it (EXECABORT) because a queued command was refused, the
// refusal itself (READONLY on a replica, OOM, …), so that the caller can
// tell an unavailable Redis (journal.Unavailable) from a fault.
func execAbortCause(cmds []goredis.Cmder, err error) error {
	if err == nil || !goredis.HasErrorPrefix(err, "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !goredis.HasErrorPrefix(cerr, "EXECABORT") {
			return fmt.Errorf("%w (%w)", cerr, err)
		}
	}
	return err
}

// isRedisErr reports whether err came from the Redis client (as opposed to
// the caller's fn).
func isRedisErr(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) || errors.Is(err, goredis.ErrClosed) || errors.Is(err, context.DeadlineExceeded)
}

var (
	_ journal.SessionUpdater = (*Store)(nil)
	_ journal.Queues         = (*Store)(nil)
)
