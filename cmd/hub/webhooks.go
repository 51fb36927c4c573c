package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/metrics"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/webhook"
)

// WebhookConfig is the webhooks configuration of `hub serve`
// (docs/webhooks.md).
type WebhookConfig struct {
	URL       string        // RUNHUB_WEBHOOK_URL, -webhook-url: one endpoint's http(s) URL
	Secret    string        // RUNHUB_WEBHOOK_SECRET (environment only): its whsec_ secret
	Events    string        // RUNHUB_WEBHOOK_EVENTS, -webhook-events: its notification types, comma-separated
	File      string        // RUNHUB_WEBHOOKS, -webhooks: JSON file of endpoints
	RetryMin  time.Duration // RUNHUB_WEBHOOK_RETRY_MIN, -webhook-retry-min: first retry delay (default 5s)
	RetryMax  time.Duration // RUNHUB_WEBHOOK_RETRY_MAX, -webhook-retry-max: longest retry delay (default 1h)
	GiveUp    time.Duration // RUNHUB_WEBHOOK_GIVE_UP, -webhook-give-up: time after which a notification is given up (default 24h)
	Timeout   time.Duration // RUNHUB_WEBHOOK_TIMEOUT, -webhook-timeout: bound of one attempt (default 10s)
	PublicURL string        // RUNHUB_PUBLIC_URL, -public-url: the workbench's URL, for links in notifications

	endpoints []webhook.Endpoint // validated by parse
}

// webhooks defines the WebhookConfig flags.
func (f *flagSet) webhooks(c *WebhookConfig) {
	f.str(&c.URL, "webhook-url", "RUNHUB_WEBHOOK_URL", "", "http(s) URL that receives signed notifications (Standard Webhooks; needs RUNHUB_WEBHOOK_SECRET; docs/webhooks.md)")
	c.Secret = f.secretEnv("RUNHUB_WEBHOOK_SECRET", "the secret that signs the notifications to RUNHUB_WEBHOOK_URL: whsec_ and the base64 of 24 to 64 random bytes (environment only)")
	f.str(&c.Events, "webhook-events", "RUNHUB_WEBHOOK_EVENTS", "", "notification types RUNHUB_WEBHOOK_URL receives, comma-separated: run.needs_approval, run.needs_input, run.finished, session.goal (empty: all but session.goal)")
	f.str(&c.File, "webhooks", "RUNHUB_WEBHOOKS", "", "JSON file of webhook endpoints, {\"webhooks\":[{name,url,secret|secret_env,events}]} (docs/webhooks.md)")
	f.dur(&c.RetryMin, "webhook-retry-min", "RUNHUB_WEBHOOK_RETRY_MIN", "5s", "delay before a notification's first retry; it doubles with each failed attempt")
	f.dur(&c.RetryMax, "webhook-retry-max", "RUNHUB_WEBHOOK_RETRY_MAX", "1h", "longest delay between two attempts")
	f.dur(&c.GiveUp, "webhook-give-up", "RUNHUB_WEBHOOK_GIVE_UP", "24h", "a notification not acknowledged this long after its first attempt is given up (counted, logged)")
	f.dur(&c.Timeout, "webhook-timeout", "RUNHUB_WEBHOOK_TIMEOUT", "10s", "bound of one delivery attempt; a receiver slower than this counts as failed and is retried")
	f.str(&c.PublicURL, "public-url", "RUNHUB_PUBLIC_URL", "", "the URL the workbench is reached at, for the session links in notifications (empty: no link)")
}

// parse validates the webhooks configuration; errors name the variable.
func (c *WebhookConfig) parse(f *flagSet) error {
	eps, err := webhook.Config{
		URL: c.URL, Secret: c.Secret, Events: c.Events, File: c.File,
		URLVar: f.source("webhook-url"), SecretVar: "RUNHUB_WEBHOOK_SECRET",
		EventsVar: f.source("webhook-events"), FileVar: f.source("webhooks"),
		Getenv: f.getenv,
	}.Endpoints()
	if err != nil {
		return err
	}
	c.endpoints = eps
	for name, d := range map[string]time.Duration{"webhook-retry-min": c.RetryMin, "webhook-retry-max": c.RetryMax,
		"webhook-give-up": c.GiveUp, "webhook-timeout": c.Timeout} {
		if d <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", f.source(name), d)
		}
	}
	if c.RetryMax < c.RetryMin {
		return fmt.Errorf("%s %v is below %s %v", f.source("webhook-retry-max"), c.RetryMax, f.source("webhook-retry-min"), c.RetryMin)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q: want an http or https URL", f.source("public-url"), c.PublicURL)
		}
	}
	return nil
}

// enabled reports whether any endpoint is configured.
func (c *WebhookConfig) enabled() bool { return len(c.endpoints) > 0 }

// startWebhooks starts the sender of the configured endpoints (nil, a
// no-op stop when there are none); in Redis mode one hub of those sharing
// the journal sends (a claim).
func startWebhooks(cfg ServeConfig, rt *procRuntime, log *slog.Logger, m *metrics.Metrics) (*webhook.Sender, func(), error) {
	c := cfg.Webhooks
	if !c.enabled() {
		return nil, func() {}, nil
	}
	var leader *webhook.RedisLeader
	o := webhook.Options{
		Endpoints: c.endpoints, Outbox: rt.outbox, Journal: rt.store,
		Retry:   webhook.Retry{Min: c.RetryMin, Max: c.RetryMax, GiveUp: c.GiveUp},
		Timeout: c.Timeout, PublicURL: c.PublicURL, Logger: log, Metrics: webhook.NewMetrics(m.Registry()),
	}
	if rt.rdb != nil {
		leader = webhook.NewRedisLeader(rt.rdb, "", rt.nodeID(), cfg.LeaseTTL, log)
		o.Leader = leader
		o.Wake = leaderWake(rt.store, leader, cfg.LeaseTTL/4)
	} else {
		o.Wake = rt.store.SubscribeFeed // in process: nothing read from elsewhere
	}
	s, err := webhook.New(o)
	if err != nil {
		return nil, nil, err
	}
	if leader != nil {
		leader.Start()
	}
	s.Start()
	names := make([]string, len(c.endpoints))
	for i, e := range c.endpoints {
		names[i] = e.Name
	}
	log.Info("webhooks on", "endpoints", names)
	return s, func() {
		s.Stop()
		if leader != nil {
			leader.Stop()
		}
	}, nil
}

// routeWebhooks serves GET /v1/webhooks/deliveries behind the admin guard.
func routeWebhooks(e *echo.Echo, h *hub.Hub, s *webhook.Sender) {
	if s == nil {
		return
	}
	e.GET("/v1/webhooks/deliveries", echo.WrapHandler(s.DeliveriesHandler()), h.RequireAdmin)
}

// leaderWake is the webhook sender's wake-up on Redis: the feed of every
// session, read only while this hub holds the sender claim (looked at
// every tick), so the other hubs read nothing of it; the sender's poll
// of the outbox delivers what a wake-up did not announce.
func leaderWake(store journal.Store, l *webhook.RedisLeader, tick time.Duration) func(func(protocol.Envelope)) func() {
	return func(fn func(protocol.Envelope)) func() {
		in := store.SubscribeInterest(fn)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(max(tick, 10*time.Millisecond))
			defer t.Stop()
			watching := false
			for {
				if lead := l.Leading(); lead != watching {
					if lead {
						in.WatchAll()
					} else {
						in.UnwatchAll()
					}
					watching = lead
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		return func() {
			close(stop)
			<-done
			in.Cancel()
		}
	}
}
