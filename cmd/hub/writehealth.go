package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// writeHealth is the journal as this process writes it, watched: a write
// the journal fails (a full disk, a read-only file, Redis refusing writes)
// makes /readyz answer 503 "journal not writable" until a write succeeds
// again, or until writeFailHold passes without another failure (nothing
// may write meanwhile to prove it recovered). Reads alone cannot tell: a
// full disk still reads. An executor whose terminal event was refused
// retries it every few seconds, which keeps the state fresh while the
// fault lasts.
type writeHealth struct {
	journal.Store
	failed   atomic.Bool // failedAt is set: a write succeeding now takes mu to clear it
	mu       sync.Mutex
	failedAt time.Time // the last failed write; zero once a write succeeded after it
	err      error
}

// writeFailHold is how long a failed write keeps the process unready
// without another write.
const writeFailHold = 30 * time.Second

func watchWrites(store journal.Store) *writeHealth { return &writeHealth{Store: store} }

func (s *writeHealth) note(err error) {
	if err != nil && (!journalFailure(err) || unreachable(err)) {
		// An answer (not found, terminal, conflict, invalid), not a
		// fault; or Redis not answering at all, which /readyz reports
		// through its PING while it lasts and must not outlast it (a
		// hub cut off from Redis would stay unready for writeFailHold
		// after the heal, with nothing to write that clears it).
		return
	}
	if err == nil && !s.failed.Load() {
		return // healthy and staying so: every append passes here, no lock
	}
	s.mu.Lock()
	if err == nil {
		s.failedAt, s.err = time.Time{}, nil
	} else {
		s.failedAt, s.err = time.Now(), err
	}
	s.failed.Store(err != nil)
	s.mu.Unlock()
}

// failing returns the last write failure while it holds, else nil.
func (s *writeHealth) failing() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failedAt.IsZero() || time.Since(s.failedAt) > writeFailHold {
		return nil
	}
	return s.err
}

func (s *writeHealth) Append(ctx context.Context, e protocol.Envelope, key string) (protocol.Envelope, error) {
	out, err := s.Store.Append(ctx, e, key)
	s.note(err)
	return out, err
}

func (s *writeHealth) CreateSession(ctx context.Context, m journal.SessionMeta) error {
	err := s.Store.CreateSession(ctx, m)
	s.note(err)
	return err
}

func (s *writeHealth) BeginRun(ctx context.Context, r journal.RunMeta) error {
	err := s.Store.BeginRun(ctx, r)
	s.note(err)
	return err
}

func (s *writeHealth) BeginRunUpdate(ctx context.Context, r journal.RunMeta, fn func(*journal.SessionMeta) error) (journal.SessionMeta, error) {
	m, err := s.Store.BeginRunUpdate(ctx, r, fn)
	s.note(err)
	return m, err
}

// unreachable reports whether err is Redis not answering — a dial or a
// connection that failed or timed out, the pool waiting for one — rather
// than a write refused by a journal that answers (a full disk, -OOM,
// -READONLY, -MISCONF).
func unreachable(err error) bool {
	var oerr *net.OpError
	return errors.As(err, &oerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, goredis.ErrPoolTimeout) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
