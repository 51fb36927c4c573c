package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/runhub/runhub/journal/redis"
)

// Redis at start. hub serve and hub runner wait for Redis as long as it
// takes rather than exit: each failed attempt is logged ("redis
// unreachable at start; retrying", the address, the error, the next
// pause), pauses grow from redisStartPause to redisStartMaxPause, and
// SIGTERM ends the wait with a clean exit. A Redis that answers with a
// refusal (a wrong password, an ACL, an unknown command) is not waited
// for: the process exits at once with that error. While hub serve waits,
// its address answers /healthz 200 (alive), /readyz 503 "redis
// unreachable" and everything else 503 unavailable (startGate).
const (
	redisStartPause    = 250 * time.Millisecond
	redisStartMaxPause = 5 * time.Second
)

// waitRedis returns once Redis at url answers PING, or with the refusal
// that makes waiting pointless, or ctx's error. waiting (may be nil) is
// called once, at the first failed attempt.
func waitRedis(ctx context.Context, url string, log *slog.Logger, waiting func()) error {
	rdb, addr, err := startClient(url)
	if err != nil {
		return fmt.Errorf("RUNHUB_REDIS_URL: %w", err)
	}
	defer rdb.Close()
	pause := redisStartPause
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			if attempt > 1 {
				log.Info("redis reachable; starting", "addr", addr, "attempts", attempt)
			}
			return nil
		case ctx.Err() != nil:
			log.Warn("stopped while waiting for redis at start", "addr", addr)
			return ctx.Err()
		case redisRefused(err):
			return fmt.Errorf("redis at %s refused the connection (check RUNHUB_REDIS_URL's credentials): %w", addr, err)
		}
		if attempt == 1 && waiting != nil {
			waiting()
		}
		log.Error("redis unreachable at start; retrying", "addr", addr, "err", err, "attempt", attempt, "retry_in", pause.String())
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			log.Warn("stopped while waiting for redis at start", "addr", addr)
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, redisStartMaxPause)
	}
}

// startClient is waitRedis's client: one connection (per node), no
// retries of its own (the loop paces them). addr names the server, or the
// cluster's seed nodes, for the log.
func startClient(url string) (rdb goredis.UniversalClient, addr string, err error) {
	if redis.IsClusterURL(url) {
		copt, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, "", err
		}
		copt.PoolSize, copt.MaxRetries, copt.MaxRedirects, copt.DialTimeout = 1, -1, -1, 2*time.Second
		return goredis.NewClusterClient(copt), strings.Join(copt.Addrs, ","), nil
	}
	copt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, "", err
	}
	copt.PoolSize, copt.MaxRetries, copt.DialTimeout = 1, -1, 2*time.Second
	return goredis.NewClient(copt), copt.Addr, nil
}

// redisRefused reports whether err is Redis answering no, rather than not
// answering (or answering "not yet": loading its data, a replica without
// its primary).
func redisRefused(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	for _, busy := range []string{"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"} {
		if goredis.HasErrorPrefix(err, busy) {
			return false
		}
	}
	return true
}

// startGate is the handler of hub serve's address until the hub is built:
// requests wait for it while the process starts, and get the waiting
// answers (see above) once it waits for Redis.
type startGate struct {
	h        http.Handler
	ready    chan struct{} // closed by set
	waitOnce sync.Once
	waiting  chan struct{} // closed by wait
}

func newStartGate() *startGate {
	return &startGate{ready: make(chan struct{}), waiting: make(chan struct{})}
}

// set hands every request, from now on, to h.
func (g *startGate) set(h http.Handler) {
	g.h = h
	close(g.ready)
}

// wait makes the gate answer for a process waiting for Redis.
func (g *startGate) wait() { g.waitOnce.Do(func() { close(g.waiting) }) }

func (g *startGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-g.ready:
	case <-r.Context().Done():
		return
	case <-g.waiting:
	}
	select {
	case <-g.ready: // built meanwhile (or both were done)
		g.h.ServeHTTP(w, r)
		return
	default:
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/healthz":
		w.WriteHeader(http.StatusOK)
		json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	case "/readyz":
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"status": "redis unreachable"})
	default:
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unavailable",
			"message": "the hub is starting: waiting for redis"}})
	}
}
