package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/retry"
	"github.com/runhub/runhub/journal"
)

// ErrNotReplicated is returned by an Append whose batch was journaled on
// the master but not acknowledged by Options.WaitReplicas replicas within
// Options.WaitTimeout. It is journal.ErrUnavailable (a master without its
// replicas, as after a failover, passes): callers answer "unavailable,
// retry", and a retry with the same idempotency key does not journal the
// event twice.
var ErrNotReplicated = fmt.Errorf("journal/redis: not acknowledged by enough replicas (%w)", journal.ErrUnavailable)

// waitAttempts bounds waitAppend's tries of one batch after a redirection
// or a lost connection (a failover in progress); waitBackoff is the pause
// before each retry (100, 200, 400 ms).
const waitAttempts = 4

var waitBackoff = retry.Backoff{Min: 100 * time.Millisecond, Max: time.Second}

// waitAppend runs append.lua and then WAIT on the same connection of the
// master of the batch's slot (one pipeline of that server: WAIT covers the
// writes of its own connection). The batch's reply cache makes a resend
// after a failed attempt answer from the first run instead of journaling
// twice.
func (s *Store) waitAppend(ctx context.Context, keys []string, args []any) ([]any, error) {
	var err error
	for attempt := range waitAttempts {
		if attempt > 0 {
			if c, ok := s.rdb.(*goredis.ClusterClient); ok {
				c.ReloadState(ctx) // the slot may have a new master
			}
			if !waitBackoff.Sleep(ctx, attempt) {
				return nil, ctx.Err()
			}
		}
		var server *goredis.Client
		if server, err = serverOf(ctx, s.rdb, keys[0]); err != nil {
			continue
		}
		var reply []any
		var acked int64
		reply, acked, err = s.evalWait(ctx, server, keys, args, false)
		if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			reply, acked, err = s.evalWait(ctx, server, keys, args, true)
		}
		if err != nil {
			if retryable(err) {
				continue
			}
			return nil, err
		}
		if acked < int64(s.opts.WaitReplicas) {
			return nil, fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, acked, s.opts.WaitReplicas, s.opts.WaitTimeout)
		}
		return reply, nil
	}
	return nil, err
}

// evalWait is one pipeline of EVALSHA (EVAL with src) and WAIT.
func (s *Store) evalWait(ctx context.Context, server *goredis.Client, keys []string, args []any, src bool) ([]any, int64, error) {
	pipe := server.Pipeline()
	var script *goredis.Cmd
	if src {
		script = appendScript.Eval(ctx, pipe, keys, args...)
	} else {
		script = appendScript.EvalSha(ctx, pipe, keys, args...)
	}
	wait := pipe.Do(ctx, "WAIT", s.opts.WaitReplicas, s.opts.WaitTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	reply, err := script.Slice()
	if err != nil {
		return nil, 0, err
	}
	acked, err := wait.Int64()
	if err != nil {
		return nil, 0, err
	}
	return reply, acked, nil
}

// retryable reports whether err means the command may succeed on another
// try: a redirection, a cluster reconfiguring, or a connection lost.
func retryable(err error) bool {
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "READONLY", "MASTERDOWN"} {
		if goredis.HasErrorPrefix(err, p) {
			return true
		}
	}
	var re goredis.Error
	return !errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, goredis.ErrClosed)
}
