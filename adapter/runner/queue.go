package runner

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/journal"
)

// maxQueueLen bounds the run queue stream (approximate trim); handled
// entries are deleted, so only a backlog nobody consumes approaches it.
const maxQueueLen = 100000

// Queue dispatches begun runs to the runners: plug Dispatch into
// executor.Options.Dispatch on a hub whose runs execute in runners.
type Queue struct{ cfg Config }

// NewQueue returns the run queue of cfg's Redis.
func NewQueue(cfg Config) *Queue {
	cfg.defaults()
	return &Queue{cfg: cfg}
}

// Dispatch queues a begun run for exactly one runner.
func (q *Queue) Dispatch(ctx context.Context, run journal.RunMeta) error {
	err := q.cfg.Client.XAdd(ctx, &goredis.XAddArgs{Stream: q.cfg.queue(), MaxLen: maxQueueLen, Approx: true,
		Values: []any{"run", run.ID, "session", run.SessionID}}).Err()
	if err != nil {
		return fmt.Errorf("runner: queue run %s: %w", run.ID, err)
	}
	return nil
}
