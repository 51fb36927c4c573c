package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// ServeConfig is the configuration of `hub serve`. Every field has a flag
// and an environment variable; a flag wins over the environment.
type ServeConfig struct {
	Addr           string        // RUNHUB_ADDR, -addr: listen address (default 127.0.0.1:8080)
	Data           string        // RUNHUB_DATA, -data: directory of the embedded journal (default ./data)
	RedisURL       string        // RUNHUB_REDIS_URL, -redis-url: Redis journal and bus; empty = embedded journal
	StatusInterval time.Duration // RUNHUB_STATUS_INTERVAL, -status-interval: least time between two statuses of a session (default 100ms)
	ClarifyTimeout time.Duration // RUNHUB_CLARIFY_TIMEOUT, -clarify-timeout: clarify prompt expiry (default 120s)
	Retention      time.Duration // RUNHUB_RETENTION, -retention: how long terminal runs are kept (default 168h; 0 = forever)
	ShutdownGrace  time.Duration // RUNHUB_SHUTDOWN_GRACE, -shutdown-grace: time sockets get to close on shutdown (default 10s)
	LogFormat      string        // RUNHUB_LOG_FORMAT, -log-format: text or json (default text)
	LogLevel       string        // RUNHUB_LOG_LEVEL, -log-level: debug, info, warn, error (default info)
}

func parseServeConfig(args []string, getenv func(string) string) (ServeConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var cfg ServeConfig
	fs.StringVar(&cfg.Addr, "addr", env("RUNHUB_ADDR", "127.0.0.1:8080"), "listen address")
	fs.StringVar(&cfg.Data, "data", env("RUNHUB_DATA", "./data"), "embedded journal directory")
	fs.StringVar(&cfg.RedisURL, "redis-url", env("RUNHUB_REDIS_URL", ""), "Redis URL (empty: embedded journal)")
	fs.StringVar(&cfg.LogFormat, "log-format", env("RUNHUB_LOG_FORMAT", "text"), "text or json")
	fs.StringVar(&cfg.LogLevel, "log-level", env("RUNHUB_LOG_LEVEL", "info"), "debug, info, warn or error")
	durations := []struct {
		p    *time.Duration
		flag string
		env  string
		def  string
	}{
		{&cfg.StatusInterval, "status-interval", "RUNHUB_STATUS_INTERVAL", "100ms"},
		{&cfg.ClarifyTimeout, "clarify-timeout", "RUNHUB_CLARIFY_TIMEOUT", "120s"},
		{&cfg.Retention, "retention", "RUNHUB_RETENTION", "168h"},
		{&cfg.ShutdownGrace, "shutdown-grace", "RUNHUB_SHUTDOWN_GRACE", "10s"},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(env(d.env, d.def))
		if err != nil {
			return cfg, fmt.Errorf("%s: %v", d.env, err)
		}
		fs.DurationVar(d.p, d.flag, v, d.env)
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	switch cfg.LogFormat {
	case "text", "json":
	default:
		return cfg, fmt.Errorf("log format %q: want text or json", cfg.LogFormat)
	}
	return cfg, nil
}
