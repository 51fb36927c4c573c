package webhook

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisLeader is a claim on one Redis key that one process of those
// sharing a journal holds at a time: the holder sends the notifications,
// the others stand by. The holder renews it every TTL/3; a holder that
// dies loses it after TTL and another takes it (the journal's runner
// reaper is chosen the same way). Start it with Start, stop it with Stop
// (which gives the claim up).
type RedisLeader struct {
	rdb goredis.UniversalClient
	key string
	id  string
	ttl time.Duration
	log *slog.Logger

	until atomic.Int64 // unix ns until which this process holds the claim
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// claimScript takes the claim when free, renews it when held by ARGV[1];
// 1 when held by ARGV[1] afterwards.
var claimScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`)

// releaseScript gives the claim up if held by ARGV[1].
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// NewRedisLeader makes the claim key prefix+"webhooks:sender" for the
// process id (unique per process) with the given TTL (default 10s).
func NewRedisLeader(rdb goredis.UniversalClient, prefix, id string, ttl time.Duration, log *slog.Logger) *RedisLeader {
	if prefix == "" {
		prefix = "rh:"
	}
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &RedisLeader{rdb: rdb, key: prefix + "webhooks:sender", id: id, ttl: ttl, log: log,
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Leading reports whether this process holds the claim now (with a margin
// of a third of the TTL before it could lapse on Redis).
func (l *RedisLeader) Leading() bool { return time.Now().UnixNano() < l.until.Load() }

// Start tries the claim at once and then every TTL/3.
func (l *RedisLeader) Start() {
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		for {
			l.try()
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (l *RedisLeader) try() {
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	start := time.Now()
	held, err := claimScript.Run(ctx, l.rdb, []string{l.key}, l.id, l.ttl.Milliseconds()).Int()
	was := l.Leading()
	switch {
	case err != nil:
		l.log.Warn("webhook: the sender claim", "err", err)
	case held == 1:
		l.until.Store(start.Add(l.ttl * 2 / 3).UnixNano())
		if !was {
			l.log.Info("webhook: this hub sends the notifications", "node_id", l.id)
		}
		return
	}
	if was && err == nil {
		l.log.Info("webhook: another hub sends the notifications now")
	}
	if err == nil {
		l.until.Store(0)
	}
}

// Stop ends the renewal and gives the claim up, so another hub takes it at
// once.
func (l *RedisLeader) Stop() {
	l.once.Do(func() {
		close(l.stop)
		<-l.done
		l.until.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = releaseScript.Run(ctx, l.rdb, []string{l.key}, l.id).Err()
	})
}
