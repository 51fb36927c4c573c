package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
)

// probeRunID is the run the readiness probe looks up: it never exists, so
// the answer is a cheap not-found from a journal that reads.
const probeRunID = "r_readyz_probe"

var (
	errRedisDown    = errors.New("redis unreachable")
	errJournalWrite = errors.New("journal not writable")
)

// ready reports why the process is not ready: Redis does not answer a
// PING (Redis mode), or the journal does not answer a read (either mode;
// a closed or unreadable bbolt file, a Redis that answers PING but not the
// journal's keys). Each check gets a second.
func (rt *procRuntime) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if rt.rdb != nil {
		if err := rt.rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("%w: %w", errRedisDown, err)
		}
	}
	if _, err := rt.store.Run(ctx, probeRunID); err != nil && !errors.Is(err, journal.ErrNotFound) {
		return fmt.Errorf("journal unreachable: %w", err)
	}
	if err := rt.writes.failing(); err != nil {
		return fmt.Errorf("%w: %w", errJournalWrite, err)
	}
	return nil
}

// routeHealth serves GET /healthz (the process serves: always 200) and GET
// /readyz (200 ready; 503 draining once draining reports true or a
// graceful stop began, or 503 with what does not answer).
func routeHealth(e *echo.Echo, rt *procRuntime, draining func() bool) {
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", func(c echo.Context) error {
		if draining() || rt.stopping.Load() {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		}
		if err := rt.ready(c.Request().Context()); err != nil {
			status := "journal unreachable"
			if errors.Is(err, errRedisDown) {
				status = "redis unreachable"
			} else if errors.Is(err, errJournalWrite) {
				status = "journal not writable"
			}
			rt.log.WarnContext(c.Request().Context(), "not ready", "err", err)
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": status})
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
}

// routeMetrics serves GET /metrics.
func routeMetrics(e *echo.Echo, m *metrics.Metrics) {
	e.GET("/metrics", echo.WrapHandler(m.Handler()))
}

// defaultHealthURL is the /healthz of the address a hub listens on
// (RUNHUB_ADDR), reached over loopback when it listens on every address.
func defaultHealthURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://127.0.0.1:8080/healthz"
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}

// Healthcheck runs `hub healthcheck`: GET the URL and succeed only on 200.
// It is the image's HEALTHCHECK (a distroless image has no shell or curl).
func Healthcheck(ctx context.Context, cfg HealthcheckConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", cfg.URL, resp.Status)
	}
	return nil
}
