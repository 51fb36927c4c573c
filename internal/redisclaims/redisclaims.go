// Package redisclaims holds what the hub's Redis stores of per-hub claims
// share (hub/redislimit's socket counts, hub/redispresence's presence
// entries): each claim carries when it lapses, on Redis's clock, and its
// hub renews its live claims every TTL/3, so a hub that dies drops out of
// the shared view within TTL.
//
// It works on a goredis.UniversalClient (one Redis or a Redis Cluster); a
// script it runs touches one key.
package redisclaims

import (
	"context"
	_ "embed"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed now.lua
var nowLua string

// Script is the script body run after a prelude (now.lua) that sets the
// local now to Redis's clock in ms.
func Script(body string) *goredis.Script { return goredis.NewScript(nowLua + body) }

// Options configure a store of claims (hub/redislimit's Counter,
// hub/redispresence's Store).
type Options struct {
	// Prefix starts every key (and channel) of the store (default "rh:",
	// the journal's).
	Prefix string
	// TTL is how long a claim lives without renewal (default: the store's
	// DefaultTTL).
	TTL time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Defaults fills in the options every store shares: prefix "rh:" (the
// journal's), TTL def and slog.Default().
func Defaults(prefix string, ttl, def time.Duration, log *slog.Logger) (string, time.Duration, *slog.Logger) {
	if prefix == "" {
		prefix = "rh:"
	}
	if ttl <= 0 {
		ttl = def
	}
	if log == nil {
		log = slog.Default()
	}
	return prefix, ttl, log
}

// Renewer owns the goroutine that renews a store's claims.
type Renewer struct {
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// StartRenewer calls renew every ttl/3, with a context that ends at the
// next tick, until Stop.
func StartRenewer(ttl time.Duration, renew func(ctx context.Context)) *Renewer {
	r := &Renewer{stop: make(chan struct{}), done: make(chan struct{})}
	every := ttl / 3
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), every)
				renew(ctx)
				cancel()
			}
		}
	}()
	return r
}

// Stop ends the renewal and waits for a renewal under way. It reports
// whether this call stopped it (false: an earlier one did). Safe for
// concurrent use.
func (r *Renewer) Stop() (first bool) {
	r.once.Do(func() {
		first = true
		close(r.stop)
	})
	<-r.done
	return first
}

// EvalEach runs script once per key of calls, with that key as KEYS[1] and
// its args as ARGV, in one pipeline.
func EvalEach(ctx context.Context, rdb goredis.UniversalClient, script *goredis.Script, calls map[string][]any) error {
	if len(calls) == 0 {
		return nil
	}
	_, err := rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for key, args := range calls {
			script.Eval(ctx, p, []string{key}, args...) // EVAL: a pipeline cannot fall back from EVALSHA
		}
		return nil
	})
	return err
}
