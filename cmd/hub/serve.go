package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/hub/redislimit"
	"github.com/runhub/runhub/hub/redispresence"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/web"
)

// Serve runs a hub until ctx ends, then shuts it down gracefully: new runs
// refused, in-process runs given the shutdown grace to finish (drain.go)
// and those still going ended as interrupted, then goaway to every socket,
// close 1012, exit.
func Serve(ctx context.Context, cfg ServeConfig) error {
	log := newLogger(cfg.LogFormat, cfg.LogLevel)
	warnUnknownEnv(log, os.Environ())
	m := metrics.New(version)
	hcfg := hub.Config{StatusInterval: cfg.StatusInterval, Logger: log, Metrics: m}
	if err := cfg.Security.apply(&hcfg); err != nil {
		return err
	}
	// Listen first: while the process waits for Redis, its address answers
	// /healthz and /readyz (startGate); a request that comes while it
	// starts waits for the hub.
	ln, err := listen(orDefault(cfg.addrFrom, "RUNHUB_ADDR"), cfg.Addr)
	if err != nil {
		return err
	}
	open := hcfg.Authenticator == nil
	if err := checkListen(ln.Addr(), open, cfg.InsecureListen); err != nil {
		ln.Close()
		return err
	}
	gate := newStartGate()
	srv := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close() // a failed start; after a clean shutdown, a no-op
	if cfg.RedisURL != "" {
		if err := waitRedis(ctx, cfg.RedisURL, log, gate.wait); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting: a clean exit
			}
			return err
		}
	}
	rt, err := openRuntime(ctx, cfg.RuntimeConfig, log, cfg.Runtime, false, m)
	if err != nil {
		return err
	}
	defer rt.close()
	store := rt.store
	if rt.rdb != nil {
		// MaxSocketsPerSubject counts a subject's sockets on every replica.
		sc := redislimit.New(rt.rdb, redislimit.Options{Logger: log})
		defer sc.Close()
		hcfg.SocketCounter = sc
		// Presence counts the tabs of every replica.
		ps := redispresence.New(rt.rdb, redispresence.Options{Logger: log})
		defer ps.Close()
		hcfg.PresenceStore = ps
	}

	hcfg.Capabilities = rt.profiles.Capabilities
	hcfg.NoRunner = rt.noRunner(log)
	h := hub.New(hcfg, store, rt.router)
	hubGauges(m, h)
	e := newEcho(log, m)
	if cfg.MetricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.RuntimeConfig, rt, h.Draining, log, m)
		if err != nil {
			h.Shutdown(context.Background())
			return err
		}
		defer stopMetrics()
	}
	sender, stopWebhooks, err := startWebhooks(cfg, rt, log, m)
	if err != nil {
		h.Shutdown(context.Background())
		return err
	}
	defer stopWebhooks()
	routeWebhooks(e, h, sender)
	if rt.rdb != nil {
		w := watchCutOff(rt.rdb, cfg.LeaseTTL, h, log)
		defer w.close()
		e.Use(w.refuse)
	}
	routeServe(e, cfg, rt, h, m)
	gate.set(e)

	if open && cfg.InsecureListen {
		log.Warn("serving WITHOUT authentication on a non-loopback address (-insecure-listen): anyone who reaches it is subject local")
	}
	log.Info("runhub serving", "url", "http://"+shownAddr(cfg.Addr, ln)+"/", "journal", journalName(cfg.RuntimeConfig), "runtime", rt.mode,
		"hub_id", h.ID(), "node_id", rt.nodeID(), "auth", !open, "version", version)
	stopTrim := startRetention(ctx, store, cfg.Retention, log)
	defer stopTrim()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	drainRuns(rt, cfg.ShutdownGrace, log)
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), socketGrace(cfg.ShutdownGrace))
	defer cancel()
	if err := h.Shutdown(sctx); err != nil {
		log.Warn("sockets did not close in time", "err", err)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}

// routeServe registers every route of hub serve's main address on e:
// /healthz and /readyz, /metrics (unless it has its own address), the tab
// socket and every edge (edges.go), /debug/pprof (when on) and the web
// UI.
func routeServe(e *echo.Echo, cfg ServeConfig, rt *procRuntime, h *hub.Hub, m *metrics.Metrics) {
	routeHealth(e, rt, h.Draining)
	if cfg.MetricsAddr == "" {
		routeMetrics(e, m)
	}
	h.Routes(e, edges(cfg, rt)...)
	if cfg.PProf {
		routePProf(e, h.RequireAdmin)
	}
	e.GET("/*", echo.WrapHandler(web.Handler()))
}

// hubGauges registers the gauges of h's sockets on m.
func hubGauges(m *metrics.Metrics, h *hub.Hub) {
	m.HubGauges(h.Stats)
}

// newEcho is an echo server with runhub's error rendering and the request
// middleware (request ids, request logs, HTTP metrics).
func newEcho(log *slog.Logger, m *metrics.Metrics) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = httpx.ErrorHandler
	e.Use(requestMiddleware(log, m))
	return e
}

// serveMetrics serves /metrics, /healthz and /readyz on cfg.MetricsAddr until the
// returned func stops it.
func serveMetrics(cfg RuntimeConfig, rt *procRuntime, draining func() bool, log *slog.Logger, m *metrics.Metrics) (func(), error) {
	ln, err := listen(orDefault(cfg.metricsAddrFrom, "RUNHUB_METRICS_ADDR"), cfg.MetricsAddr)
	if err != nil {
		return nil, err
	}
	e := newEcho(log, m)
	routeHealth(e, rt, draining)
	routeMetrics(e, m)
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("serving metrics", "url", "http://"+shownAddr(cfg.MetricsAddr, ln)+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// routePProf serves net/http/pprof under /debug/pprof/ (RUNHUB_PPROF=1),
// behind guard (the admin role when authentication is on): the index,
// cmdline, profile (CPU), symbol, trace and every named profile (heap,
// allocs, goroutine, mutex, block, threadcreate).
func routePProf(e *echo.Echo, guard echo.MiddlewareFunc) {
	g := e.Group("/debug/pprof", guard)
	g.GET("", func(c echo.Context) error {
		return c.Redirect(http.StatusMovedPermanently, "/debug/pprof/")
	})
	g.GET("/", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	g.GET("/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
	g.GET("/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
	g.Any("/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
	g.GET("/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
	g.GET("/:name", func(c echo.Context) error {
		pprof.Handler(c.Param("name")).ServeHTTP(c.Response(), c.Request())
		return nil
	})
}

// startRetention trims terminal runs older than retention every hour (and
// once at start); it returns a func that stops it and waits.
func startRetention(ctx context.Context, store journal.Store, retention time.Duration, log *slog.Logger) func() {
	if retention <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			if n, err := store.Trim(ctx, time.Now().Add(-retention)); err != nil {
				log.Warn("retention trim", "err", err)
			} else if n > 0 {
				log.Info("retention trimmed runs", "runs", n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
