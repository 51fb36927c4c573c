package redislimit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultTTL is how long a claim outlives its hub's last renewal.
const DefaultTTL = 30 * time.Second

// Options configures a Counter.
type Options struct {
	// Prefix starts every key (default "rh:", the journal's).
	Prefix string
	// TTL is how long a claim lives without renewal (default DefaultTTL).
	TTL time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Counter is one hub's view of the shared socket counts.
type Counter struct {
	rdb  goredis.UniversalClient
	opts Options

	mu   sync.Mutex
	mine map[string]map[string]struct{} // subject → ids of this hub's claimed sockets

	stop chan struct{}
	done chan struct{}
}

// claimScript drops lapsed claims, refuses one past the limit (ARGV[3] > 0)
// and adds the socket. KEYS[1] the subject's set; ARGV[1] id, ARGV[2] TTL
// in ms, ARGV[3] limit. Replies 1 (claimed) or 0 (refused).
var claimScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[3])
if limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// renewScript moves the lapse of the given claims (ARGV[2..]) TTL (ARGV[1]
// ms) ahead. XX: a claim released meanwhile is not brought back.
var renewScript = goredis.NewScript(`
local t = redis.call('TIME')
local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', at, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

// New returns a Counter on rdb (a single Redis or a Cluster: every command
// touches one key) and starts its renewal; Close stops it.
func New(rdb goredis.UniversalClient, opts Options) *Counter {
	if opts.Prefix == "" {
		opts.Prefix = "rh:"
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Counter{rdb: rdb, opts: opts, mine: map[string]map[string]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.renewLoop()
	return c
}

func (c *Counter) key(subject string) string { return c.opts.Prefix + "sockets:{" + subject + "}" }

// Claim counts socket id of subject unless the subject already has limit
// live sockets over all hubs (limit ≤ 0: no bound); it reports whether it
// did. An error leaves nothing counted.
func (c *Counter) Claim(ctx context.Context, subject, id string, limit int) (bool, error) {
	ok, err := claimScript.Run(ctx, c.rdb, []string{c.key(subject)}, id, c.opts.TTL.Milliseconds(), limit).Int()
	if err != nil || ok != 1 {
		return false, err
	}
	c.mu.Lock()
	ids := c.mine[subject]
	if ids == nil {
		ids = map[string]struct{}{}
		c.mine[subject] = ids
	}
	ids[id] = struct{}{}
	c.mu.Unlock()
	return true, nil
}

// Release uncounts socket id of subject. Should Redis not answer, the
// claim lapses after TTL: it is no longer renewed.
func (c *Counter) Release(subject, id string) {
	c.mu.Lock()
	if ids := c.mine[subject]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(c.mine, subject)
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.rdb.ZRem(ctx, c.key(subject), id).Err(); err != nil {
		c.opts.Logger.Warn("redislimit: release a socket claim; it lapses on its own", "err", err)
	}
}

// renewLoop renews this hub's claims every TTL/3 until Close.
func (c *Counter) renewLoop() {
	defer close(c.done)
	t := time.NewTicker(c.opts.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.renew()
		}
	}
}

func (c *Counter) renew() {
	c.mu.Lock()
	batch := make(map[string][]any, len(c.mine))
	for subject, ids := range c.mine {
		args := make([]any, 0, len(ids)+1)
		args = append(args, c.opts.TTL.Milliseconds())
		for id := range ids {
			args = append(args, id)
		}
		batch[subject] = args
	}
	c.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.TTL/3)
	defer cancel()
	_, err := c.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for subject, args := range batch {
			renewScript.Eval(ctx, p, []string{c.key(subject)}, args...) // EVAL: a pipeline cannot fall back from EVALSHA
		}
		return nil
	})
	if err != nil {
		c.opts.Logger.Warn("redislimit: renew socket claims", "err", err)
	}
}

// Close stops the renewal. The hub's claims lapse after TTL unless its
// sockets released them (a hub closes its sockets before this).
func (c *Counter) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}
