package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// cutOff watches a hub's Redis. A hub cut off from it (a network
// partition, Redis gone) for longer than after (the lease TTL: how long a
// run rides out an outage) can deliver its tabs nothing — no event, no
// status, no control — while a replica that reaches Redis can: it tells
// every tab to move (goaway "redis unreachable", close 1012; the tab
// reconnects through the load balancer and refocuses from its cursor),
// and until Redis answers again it refuses new tab sockets with 503
// `unavailable` (the load balancer's /readyz check steers them away
// already). Shorter outages only pause the tabs.
type cutOff struct {
	rdb   goredis.UniversalClient
	after time.Duration
	log   *slog.Logger
	off   atomic.Bool // cut off past after, not answered since
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// redisUnreachable is the goaway's reason.
const redisUnreachable = "redis unreachable"

// watchCutOff starts the watch of h's Redis; stop ends it.
func watchCutOff(rdb goredis.UniversalClient, after time.Duration, h *hub.Hub, log *slog.Logger) *cutOff {
	ctx, cancel := context.WithCancel(context.Background())
	w := &cutOff{rdb: rdb, after: after, log: log, stop: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.loop(ctx, h)
	}()
	return w
}

// every is how often the watch pings: a quarter of after, at most 1 s.
func (w *cutOff) every() time.Duration { return min(w.after/4, time.Second) }

func (w *cutOff) loop(ctx context.Context, h *hub.Hub) {
	t := time.NewTicker(w.every())
	defer t.Stop()
	var failingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := w.rdb.Ping(pctx).Err()
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			failingSince = time.Time{}
			if w.off.Swap(false) {
				w.log.Info("redis reachable again; taking tab sockets")
			}
		case failingSince.IsZero():
			failingSince = time.Now()
		case time.Since(failingSince) >= w.after && !w.off.Load():
			w.off.Store(true)
			n := h.Goaway(redisUnreachable)
			w.log.Warn("cut off from redis for longer than the lease TTL: told the tabs to move to another hub",
				"tabs", n, "since", failingSince.Format(time.RFC3339Nano), "err", err)
		}
	}
}

// refuse answers the tab socket's upgrade 503 while the hub is cut off.
func (w *cutOff) refuse(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if w.off.Load() && c.Request().Method == http.MethodGet && c.Request().URL.Path == "/v1/ws" {
			// Asked rather than taken from the last ping: /readyz may
			// have seen Redis back already.
			ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
			err := w.rdb.Ping(ctx).Err()
			cancel()
			if err != nil {
				return protocol.Errorf(protocol.CodeUnavailable, "this hub cannot reach redis; connect to another")
			}
			if w.off.Swap(false) {
				w.log.Info("redis reachable again; taking tab sockets")
			}
		}
		return next(c)
	}
}

// close stops the watch.
func (w *cutOff) close() {
	w.stop()
	w.wg.Wait()
}
