package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// CreateSession registers a new session (create_session.lua: the existence
// check, the hash and the owner's list of the session's shard in one step).
func (s *Store) CreateSession(ctx context.Context, m journal.SessionMeta) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := protocol.ValidID(m.ID); err != nil {
		return err
	}
	if m.CreatedAt == 0 {
		m.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	journal.RedactSession(&m)
	sh := s.k.shardOf(m.ID)
	n, err := createSessionScript.Run(ctx, s.rdb, []string{s.k.session(sh, m.ID), s.k.owner(sh, m.Owner), s.k.feed(sh)},
		m.ID, m.Owner, m.Title, formatTime(m.CreatedAt), s.opts.FeedMaxLen, string(journal.SessionChanged)).Int()
	if err != nil {
		return s.fail("create session", err)
	}
	if n == 0 {
		return fmt.Errorf("journal/redis: session %s: %w", m.ID, journal.ErrExists)
	}
	return nil
}

// Session returns a session's meta.
func (s *Store) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	if err := s.check(); err != nil {
		return journal.SessionMeta{}, err
	}
	list, err := s.sessions(ctx, []string{id})
	if err != nil {
		return journal.SessionMeta{}, err
	}
	if len(list) == 0 {
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: session %s: %w", id, journal.ErrNotFound)
	}
	return list[0], nil
}

// Sessions lists the owner's sessions in creation order: each shard keeps
// the list of the owner's sessions it holds, so it reads them all (one
// pipeline) and orders the sessions by created_at.
func (s *Store) Sessions(ctx context.Context, owner string) ([]journal.SessionMeta, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	lists := make([]*goredis.StringSliceCmd, s.k.shards())
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for n := range lists {
			lists[n] = p.LRange(ctx, s.k.owner(n, owner), 0, -1)
		}
		return nil
	}); err != nil {
		return nil, s.fail("sessions", err)
	}
	var ids []string
	for _, l := range lists {
		ids = append(ids, l.Val()...)
	}
	out, err := s.sessions(ctx, ids)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b journal.SessionMeta) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return out, nil
}

// SessionsPage lists a page of an owner's sessions; see journal.Registry.
// Sessions' order is by creation time across the owner's shards, known
// only from the metas, so every one is read and the page cut from them.
func (s *Store) SessionsPage(ctx context.Context, owner, after string, limit int) ([]journal.SessionMeta, bool, error) {
	all, err := s.Sessions(ctx, owner)
	if err != nil {
		return nil, false, err
	}
	start := 0
	if after != "" {
		i := slices.IndexFunc(all, func(m journal.SessionMeta) bool { return m.ID == after })
		if i < 0 {
			return nil, false, fmt.Errorf("%w: session %q of %q", journal.ErrNotFound, after, owner)
		}
		start = i + 1
	}
	end := min(len(all), start+limit)
	return all[start:end], end < len(all), nil
}

// sessions loads sessions by id in one pipeline, skipping missing ones.
func (s *Store) sessions(ctx context.Context, ids []string) ([]journal.SessionMeta, error) {
	out := []journal.SessionMeta{}
	if len(ids) == 0 {
		return out, nil
	}
	metas := make([]*goredis.MapStringStringCmd, len(ids))
	runs := make([]*goredis.StringSliceCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			n := s.k.shardOf(id)
			metas[i] = p.HGetAll(ctx, s.k.session(n, id))
			runs[i] = p.LRange(ctx, s.k.sessionRuns(n, id), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("session", err)
	}
	for i := range ids {
		h := metas[i].Val()
		if len(h) == 0 {
			continue
		}
		m, err := decodeSession(h, runs[i].Val())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// BeginRun registers a run as its session's newest and active run
// (begin_run.lua: the conflict check is atomic with the registration), in
// its session's shard. The run's locator (which names that shard, for the
// lookups by run id alone) is written first, and removed again when the run
// is not registered. The request is redacted before it is stored; an empty
// owner becomes the session's.
func (s *Store) BeginRun(ctx context.Context, r journal.RunMeta) error {
	_, err := s.beginRun(ctx, r, nil)
	return err
}

// BeginRunUpdate registers a run and changes its session's runtime-owned
// state in one script (begin_run.lua): fn is applied to the session as read
// here, and the script writes its result only when the session's state is
// still what was read (else it reads again, as UpdateSession's WATCH
// does); see journal.Queues.
func (s *Store) BeginRunUpdate(ctx context.Context, r journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	return s.beginRun(ctx, r, fn)
}

// beginRun is BeginRun, and BeginRunUpdate when fn is set.
func (s *Store) beginRun(ctx context.Context, r journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	if err := s.check(); err != nil {
		return journal.SessionMeta{}, err
	}
	if err := protocol.ValidID(r.ID); err != nil {
		return journal.SessionMeta{}, err
	}
	if err := protocol.ValidID(r.SessionID); err != nil {
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: session %q: %w", r.SessionID, journal.ErrNotFound)
	}
	if r.CreatedAt == 0 {
		r.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	var request []byte
	if len(r.Request) > 0 {
		request = journal.RedactJSON(r.Request)
	}
	n := s.k.shardOf(r.SessionID)
	created, taken, err := s.claimLocator(ctx, r.ID, n)
	if err != nil {
		return journal.SessionMeta{}, s.fail("begin run", err)
	}
	if taken {
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: begin run %s: %w", r.ID, journal.ErrExists)
	}
	keys := []string{s.k.session(n, r.SessionID), s.k.sessionRuns(n, r.SessionID), s.k.run(n, r.ID), s.k.active(n), s.k.feed(n), s.k.queued(n)}
	var status string
	var out journal.SessionMeta
	for attempt := 0; ; attempt++ {
		args := []any{r.ID, r.SessionID, r.Owner, formatTime(r.CreatedAt), request,
			s.opts.FeedMaxLen, string(journal.SessionChanged), ""}
		if fn != nil {
			if attempt == maxUpdateAttempts {
				status = "contention"
				break
			}
			var upd []any
			var perr error
			if out, upd, perr = s.prepareUpdate(ctx, n, r.SessionID, fn); perr != nil {
				// Read or refused before the script ran: nothing is
				// registered (an earlier attempt's script said "changed").
				if created {
					dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
					s.dropLocator(dctx, r.ID, n)
					cancel()
				}
				if isRedisErr(perr) || journal.Unavailable(perr) {
					return journal.SessionMeta{}, s.fail("begin run", perr)
				}
				return journal.SessionMeta{}, perr
			}
			if upd == nil {
				status = "conflict" // an active run: fn is not applied
				break
			}
			args = append(args[:7], upd...)
		}
		status, err = beginRunScript.Run(ctx, s.rdb, keys, args...).Text()
		if err != nil || status != "changed" {
			break
		}
	}
	if err != nil {
		// The run may or may not be registered: the locator stays (a
		// leftover is replaced by the next BeginRun of the id).
		return journal.SessionMeta{}, s.fail("begin run", err)
	}
	if created && status != "ok" && status != "exists" {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
		s.dropLocator(dctx, r.ID, n)
		cancel()
	}
	switch status {
	case "ok":
		s.locs.put(r.ID, n)
		s.runs.located(r.ID, n)
		out.Runs = append(out.Runs, r.ID)
		out.ActiveRun = r.ID
		return out, nil
	case "notfound":
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: begin run %s: session %s: %w", r.ID, r.SessionID, journal.ErrNotFound)
	case "exists":
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: begin run %s: %w", r.ID, journal.ErrExists)
	case "conflict":
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: begin run %s: session %s has an active run: %w", r.ID, r.SessionID, journal.ErrConflict)
	case "contention":
		return journal.SessionMeta{}, fmt.Errorf("journal/redis: begin run %s: too much contention on session %s: %w", r.ID, r.SessionID, journal.ErrConflict)
	}
	return journal.SessionMeta{}, fmt.Errorf("journal/redis: begin run: unexpected reply %q", status)
}

// DeleteSession removes a session without an active run, with its runs
// (delete_session.lua: the active-run check, which BeginRun shares, and
// every deletion in one step). The script re-checks the owner and run
// list read here and asks for another read when they changed. Every key
// the script touches is in the session's shard (one slot); the runs'
// locators, outside it, are dropped after it.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	n := s.k.shardOf(id)
	for range maxUpdateAttempts {
		owner, err := s.rdb.HGet(ctx, s.k.session(n, id), "owner").Result()
		if errors.Is(err, goredis.Nil) {
			return fmt.Errorf("journal/redis: session %s: %w", id, journal.ErrNotFound)
		}
		if err != nil {
			return s.fail("delete session", err)
		}
		runs, err := s.rdb.LRange(ctx, s.k.sessionRuns(n, id), 0, -1).Result()
		if err != nil {
			return s.fail("delete session", err)
		}
		keys := []string{s.k.session(n, id), s.k.sessionRuns(n, id), s.k.owner(n, owner), s.k.ended(n), s.k.active(n), s.k.feed(n)}
		args := []any{id, owner, s.opts.FeedMaxLen, string(journal.SessionChanged)}
		for _, rid := range runs {
			keys = append(keys, s.k.run(n, rid), s.k.events(n, rid), s.k.idem(n, rid))
			args = append(args, rid)
		}
		status, err := deleteSessionScript.Run(ctx, s.rdb, keys, args...).Text()
		if err != nil {
			return s.fail("delete session", err)
		}
		switch status {
		case "ok":
			for _, rid := range runs {
				s.dropLocator(ctx, rid, n)
			}
			return nil
		case "notfound":
			return fmt.Errorf("journal/redis: session %s: %w", id, journal.ErrNotFound)
		case "conflict":
			return fmt.Errorf("journal/redis: delete session %s: it has an active run: %w", id, journal.ErrConflict)
		case "retry":
			continue
		default:
			return fmt.Errorf("journal/redis: delete session: unexpected reply %q", status)
		}
	}
	return fmt.Errorf("journal/redis: delete session %s: too much contention: %w", id, journal.ErrConflict)
}

// ActiveRuns lists every run without a terminal event, oldest first (the
// active-runs sets of every shard, then the runs' metas: two pipelines).
func (s *Store) ActiveRuns(ctx context.Context) ([]journal.RunMeta, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	sets := make([]*goredis.StringSliceCmd, s.k.shards())
	if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for n := range sets {
			sets[n] = p.SMembers(ctx, s.k.active(n))
		}
		return nil
	}); err != nil {
		return nil, s.fail("active runs", err)
	}
	out := []journal.RunMeta{}
	var cmds []*goredis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for n, set := range sets {
			for _, id := range set.Val() {
				cmds = append(cmds, p.HGetAll(ctx, s.k.run(n, id)))
			}
		}
		return nil
	})
	if len(cmds) == 0 {
		return out, nil
	}
	if err != nil {
		return nil, s.fail("active runs", err)
	}
	for _, c := range cmds {
		if len(c.Val()) == 0 {
			continue // trimmed meanwhile (cannot be: only terminal runs are trimmed)
		}
		m, err := decodeRunMeta(c.Val())
		if err != nil {
			return nil, err
		}
		if !m.Terminal {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b journal.RunMeta) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// trimBatch is how many terminal runs Trim lists per round.
const trimBatch = 256

// Trim deletes the terminal runs whose terminal event is older than before,
// one trim.lua per run (which re-checks that the run is terminal), then the
// run's locator. Each shard's ended-runs zset is walked in batches, oldest
// first.
func (s *Store) Trim(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	trimmed := 0
	for n := range s.k.shards() {
		t, err := s.trimShard(ctx, n, protocol.Timestamp(before))
		trimmed += t
		if err != nil {
			return trimmed, err
		}
	}
	return trimmed, nil
}

// trimShard is Trim in shard n.
func (s *Store) trimShard(ctx context.Context, n int, cutoff float64) (int, error) {
	trimmed := 0
	for {
		ids, err := s.rdb.ZRangeArgs(ctx, goredis.ZRangeArgs{
			Key: s.k.ended(n), Start: "-inf", Stop: "(" + formatTime(cutoff),
			ByScore: true, Count: trimBatch,
		}).Result()
		if err != nil {
			return trimmed, s.fail("trim", err)
		}
		if len(ids) == 0 {
			return trimmed, nil
		}
		sids := make([]*goredis.StringCmd, len(ids))
		if _, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				sids[i] = p.HGet(ctx, s.k.run(n, id), "session_id")
			}
			return nil
		}); err != nil && !errors.Is(err, goredis.Nil) {
			return trimmed, s.fail("trim", err)
		}
		progress := false
		for i, id := range ids {
			sid := sids[i].Val()
			keys := []string{s.k.run(n, id), s.k.events(n, id), s.k.idem(n, id), s.k.ended(n), s.k.sessionRuns(n, sid)}
			done, err := trimScript.Run(ctx, s.rdb, keys, id, sid, formatTime(cutoff)).Int()
			if err != nil {
				return trimmed, s.fail("trim", err)
			}
			if done > 0 {
				s.dropLocator(ctx, id, n)
			}
			trimmed += done
			if done > 0 || sid == "" {
				progress = true // the run (or its stale index entry) left the zset
			}
		}
		if !progress || len(ids) < trimBatch {
			return trimmed, nil
		}
	}
}
