package main

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// observedStore is the journal as this process uses it, measured: append
// and read latencies, failures, and the events (by type) and run outcomes
// this process journaled. The backends know nothing of it.
type observedStore struct {
	journal.Store // a freshAppends telling m of each event journaled here
	m             *metrics.Metrics
}

// observe wraps store with m (store itself when m is nil).
func observe(store journal.Store, m *metrics.Metrics) journal.Store {
	if m == nil {
		return store
	}
	return &observedStore{Store: &freshAppends{Store: store, fn: m.EventAppended}, m: m}
}

// Append journals e, measured.
func (s *observedStore) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	start := time.Now()
	out, err := s.Store.Append(ctx, e, key)
	s.m.JournalAppend(time.Since(start), journalFailure(err))
	if err != nil && errors.Is(err, journal.ErrTerminal) {
		s.m.AppendFenced()
	}
	return out, err
}

// freshAppends is the journal telling fn of each event this process
// journaled. An event without created_at gets it here, so that an
// idempotent replay of an event another writer stored first (its
// created_at differs) is told apart and not told twice.
type freshAppends struct {
	journal.Store
	fn func(*protocol.Envelope)
}

func (s *freshAppends) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	if e.CreatedAt == 0 {
		e.CreatedAt = protocol.Timestamp(time.Now())
	}
	out, err := s.Store.Append(ctx, e, key)
	if err == nil && out.CreatedAt == e.CreatedAt {
		s.fn(&out)
	}
	return out, err
}

func (s *observedStore) Read(ctx context.Context, runID string, afterSeq uint64, limit int) ([]protocol.Envelope, error) {
	start := time.Now()
	events, err := s.Store.Read(ctx, runID, afterSeq, limit)
	s.m.JournalRead(metrics.OpRead, time.Since(start), journalFailure(err))
	return events, err
}

func (s *observedStore) Run(ctx context.Context, runID string) (journal.RunMeta, error) {
	start := time.Now()
	meta, err := s.Store.Run(ctx, runID)
	s.m.JournalRead(metrics.OpRun, time.Since(start), journalFailure(err))
	return meta, err
}

func (s *observedStore) Session(ctx context.Context, id string) (journal.SessionMeta, error) {
	start := time.Now()
	meta, err := s.Store.Session(ctx, id)
	s.m.JournalRead(metrics.OpSession, time.Since(start), journalFailure(err))
	return meta, err
}

func (s *observedStore) Sessions(ctx context.Context, owner string) ([]journal.SessionMeta, error) {
	start := time.Now()
	metas, err := s.Store.Sessions(ctx, owner)
	s.m.JournalRead(metrics.OpSessions, time.Since(start), journalFailure(err))
	return metas, err
}

func (s *observedStore) ActiveRuns(ctx context.Context) ([]journal.RunMeta, error) {
	start := time.Now()
	runs, err := s.Store.ActiveRuns(ctx)
	s.m.JournalRead(metrics.OpActiveRuns, time.Since(start), journalFailure(err))
	return runs, err
}

// journalFailure reports whether err is a fault of the journal rather than
// an answer (not found, already terminal, a conflict, an invalid event) or
// the caller leaving.
func journalFailure(err error) bool {
	if err == nil {
		return false // the common case, without errors.As's allocation
	}
	var pe *protocol.Error
	switch {
	case err == nil, errors.Is(err, journal.ErrNotFound), errors.Is(err, journal.ErrTerminal),
		errors.Is(err, journal.ErrConflict), errors.Is(err, journal.ErrExists),
		errors.Is(err, context.Canceled), errors.As(err, &pe):
		return false
	}
	return true
}

// reaped is the journal the Redis node reaps through: a terminal
// interrupted error it journals is a run whose lease expired.
func reaped(store journal.Store, m *metrics.Metrics) journal.Store {
	return &freshAppends{Store: store, fn: func(e *protocol.Envelope) {
		if e.Terminal && metrics.TerminalState(e) == protocol.StatusInterrupted {
			m.LeaseExpired()
		}
	}}
}

// redisHook counts failed Redis commands and dials by kind, and
// connections made again after a failure.
type redisHook struct {
	m      *metrics.Metrics
	broken atomic.Bool // a connection failed since the last successful dial
}

func (h *redisHook) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			h.fail(err)
		} else if h.broken.CompareAndSwap(true, false) {
			h.m.RedisReconnected()
		}
		return c, err
	}
}

func (h *redisHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h.fail(err)
		return err
	}
}

func (h *redisHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		h.fail(err)
		return err
	}
}

// fail counts err unless it is an answer (nil reply), the caller leaving,
// the client closing, or a reply the client handles itself (NOSCRIPT:
// go-redis sends the script; UNBLOCKED: a blocking read unblocked on
// purpose).
func (h *redisHook) fail(err error) {
	if kind := redisErrorKind(err); kind != "" {
		h.m.RedisError(kind)
		if kind != metrics.RedisReply {
			h.broken.Store(true)
		}
	}
}

func redisErrorKind(err error) string {
	var rerr goredis.Error
	var nerr net.Error
	switch {
	case err == nil, errors.Is(err, goredis.Nil), errors.Is(err, context.Canceled), errors.Is(err, goredis.ErrClosed):
		return ""
	case errors.As(err, &rerr):
		if goredis.HasErrorPrefix(err, "NOSCRIPT") || goredis.HasErrorPrefix(err, "UNBLOCKED") {
			return ""
		}
		return metrics.RedisReply
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, goredis.ErrPoolTimeout),
		errors.As(err, &nerr) && nerr.Timeout():
		return metrics.RedisTimeout
	}
	return metrics.RedisNetwork // refused, reset, EOF, a broken pipe: the connection failed
}
