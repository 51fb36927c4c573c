package runner

import (
	"context"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The runners' heartbeats: rh:runners, a sorted set of the consuming
// nodes' ids scored by the Unix milliseconds of their last heartbeat. A
// consuming node (a runner) writes its own every LeaseTTL/3 and removes it
// when it stops; entries older than a day (nodes killed) are trimmed by
// the heartbeats, so the set holds the runners of the last day at most.
func (c *Config) runners() string { return c.Prefix + "runners" }

// forgetAfter is how old a heartbeat is trimmed from the set.
const forgetAfter = 24 * time.Hour

// heartbeat records that the node consumes now.
func (n *Node) heartbeat(ctx context.Context) error {
	now := time.Now()
	_, err := n.opts.Client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.ZAdd(ctx, n.opts.runners(), goredis.Z{Score: float64(now.UnixMilli()), Member: n.opts.ID})
		p.ZRemRangeByScore(ctx, n.opts.runners(), "-inf", "("+strconv.FormatInt(now.Add(-forgetAfter).UnixMilli(), 10))
		return nil
	})
	return err
}

// heartbeatLoop writes the node's heartbeat at once and every LeaseTTL/3
// until ctx ends, then removes it.
func (n *Node) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(n.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		if err := n.heartbeat(ctx); err != nil && ctx.Err() == nil {
			n.log.Debug("runner: heartbeat", "node", n.opts.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n.opts.Client.ZRem(dctx, n.opts.runners(), n.opts.ID)
			return
		case <-t.C:
		}
	}
}

// Liveness tells a hub that dispatches runs whether any runner has been
// alive lately: a heartbeat within the window (default the lease TTL,
// three heartbeats). Its answer is cached for a second; it is safe for
// concurrent use.
type Liveness struct {
	cfg    Config
	window time.Duration

	mu      sync.Mutex
	checked time.Time
	alive   bool
}

// NewLiveness reads cfg's runners' heartbeats; window 0 is cfg's LeaseTTL.
func NewLiveness(cfg Config, window time.Duration) *Liveness {
	cfg.defaults()
	if window <= 0 {
		window = cfg.LeaseTTL
	}
	return &Liveness{cfg: cfg, window: window}
}

// Window is how recent a heartbeat must be.
func (l *Liveness) Window() time.Duration { return l.window }

// Alive reports whether a runner's heartbeat is within the window. A
// failed read (Redis down) reports true with the error: unknown is not
// taken for absent.
func (l *Liveness) Alive(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.checked.IsZero() && time.Since(l.checked) < time.Second {
		return l.alive, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	since := time.Now().Add(-l.window).UnixMilli()
	n, err := l.cfg.Client.ZCount(ctx, l.cfg.runners(), strconv.FormatInt(since, 10), "+inf").Result()
	if err != nil {
		return true, err
	}
	l.checked, l.alive = time.Now(), n > 0
	return l.alive, nil
}
