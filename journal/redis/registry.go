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
// check, the hash and the owner's list in one step).
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
	n, err := createSessionScript.Run(ctx, s.rdb, []string{s.k.session(m.ID), s.k.owner(m.Owner), s.k.feedOf(m.ID)},
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

// Sessions lists the owner's sessions in creation order.
func (s *Store) Sessions(ctx context.Context, owner string) ([]journal.SessionMeta, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ids, err := s.rdb.LRange(ctx, s.k.owner(owner), 0, -1).Result()
	if err != nil {
		return nil, s.fail("sessions", err)
	}
	return s.sessions(ctx, ids)
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
			metas[i] = p.HGetAll(ctx, s.k.session(id))
			runs[i] = p.LRange(ctx, s.k.sessionRuns(id), 0, -1)
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
// (begin_run.lua: the conflict check is atomic with the registration). The
// request is redacted before it is stored; an empty owner becomes the
// session's.
func (s *Store) BeginRun(ctx context.Context, r journal.RunMeta) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := protocol.ValidID(r.ID); err != nil {
		return err
	}
	if err := protocol.ValidID(r.SessionID); err != nil {
		return fmt.Errorf("journal/redis: session %q: %w", r.SessionID, journal.ErrNotFound)
	}
	if r.CreatedAt == 0 {
		r.CreatedAt = protocol.Timestamp(s.opts.Now())
	}
	var request []byte
	if len(r.Request) > 0 {
		request = journal.RedactJSON(r.Request)
	}
	keys := []string{s.k.session(r.SessionID), s.k.sessionRuns(r.SessionID), s.k.run(r.ID), s.k.active(), s.k.feedOf(r.SessionID)}
	status, err := beginRunScript.Run(ctx, s.rdb, keys, r.ID, r.SessionID, r.Owner, formatTime(r.CreatedAt), request,
		s.opts.FeedMaxLen, string(journal.SessionChanged)).Text()
	if err != nil {
		return s.fail("begin run", err)
	}
	switch status {
	case "ok":
		return nil
	case "notfound":
		return fmt.Errorf("journal/redis: begin run %s: session %s: %w", r.ID, r.SessionID, journal.ErrNotFound)
	case "exists":
		return fmt.Errorf("journal/redis: begin run %s: %w", r.ID, journal.ErrExists)
	case "conflict":
		return fmt.Errorf("journal/redis: begin run %s: session %s has an active run: %w", r.ID, r.SessionID, journal.ErrConflict)
	}
	return fmt.Errorf("journal/redis: begin run: unexpected reply %q", status)
}

// DeleteSession removes a session without an active run, with its runs
// (delete_session.lua: the active-run check, which BeginRun shares, and
// every deletion in one step). The script re-checks the owner and run
// list read here and asks for another read when they changed.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	for range maxUpdateAttempts {
		owner, err := s.rdb.HGet(ctx, s.k.session(id), "owner").Result()
		if errors.Is(err, goredis.Nil) {
			return fmt.Errorf("journal/redis: session %s: %w", id, journal.ErrNotFound)
		}
		if err != nil {
			return s.fail("delete session", err)
		}
		runs, err := s.rdb.LRange(ctx, s.k.sessionRuns(id), 0, -1).Result()
		if err != nil {
			return s.fail("delete session", err)
		}
		keys := []string{s.k.session(id), s.k.sessionRuns(id), s.k.owner(owner), s.k.ended(), s.k.active(), s.k.feedOf(id)}
		args := []any{id, owner, s.opts.FeedMaxLen, string(journal.SessionChanged)}
		for _, rid := range runs {
			keys = append(keys, s.k.run(rid), s.k.events(rid), s.k.idem(rid))
			args = append(args, rid)
		}
		status, err := deleteSessionScript.Run(ctx, s.rdb, keys, args...).Text()
		if err != nil {
			return s.fail("delete session", err)
		}
		switch status {
		case "ok":
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

// ActiveRuns lists every run without a terminal event, oldest first.
func (s *Store) ActiveRuns(ctx context.Context) ([]journal.RunMeta, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ids, err := s.rdb.SMembers(ctx, s.k.active()).Result()
	if err != nil {
		return nil, s.fail("active runs", err)
	}
	out := []journal.RunMeta{}
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*goredis.MapStringStringCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.k.run(id))
		}
		return nil
	})
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
// one trim.lua per run (which re-checks that the run is terminal). The
// ended-runs zset is walked in batches, oldest first.
func (s *Store) Trim(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	cutoff := protocol.Timestamp(before)
	trimmed := 0
	for {
		ids, err := s.rdb.ZRangeArgs(ctx, goredis.ZRangeArgs{
			Key: s.k.ended(), Start: "-inf", Stop: "(" + formatTime(cutoff),
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
				sids[i] = p.HGet(ctx, s.k.run(id), "session_id")
			}
			return nil
		}); err != nil && !errors.Is(err, goredis.Nil) {
			return trimmed, s.fail("trim", err)
		}
		progress := false
		for i, id := range ids {
			sid := sids[i].Val()
			keys := []string{s.k.run(id), s.k.events(id), s.k.idem(id), s.k.ended(), s.k.sessionRuns(sid)}
			n, err := trimScript.Run(ctx, s.rdb, keys, id, sid, formatTime(cutoff)).Int()
			if err != nil {
				return trimmed, s.fail("trim", err)
			}
			trimmed += n
			if n > 0 || sid == "" {
				progress = true // the run (or its stale index entry) left the zset
			}
		}
		if !progress || len(ids) < trimBatch {
			return trimmed, nil
		}
	}
}
