package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// RuntimeConfig is what `hub serve` and `hub runner` share: the journal and
// the executor.
type RuntimeConfig struct {
	Data           string        // RUNHUB_DATA, -data: directory of the embedded journal (default ./data)
	RedisURL       string        // RUNHUB_REDIS_URL, -redis-url: Redis journal and bus; empty = embedded journal
	ClarifyTimeout time.Duration // RUNHUB_CLARIFY_TIMEOUT, -clarify-timeout: clarify prompt expiry (default 120s)
	LeaseTTL       time.Duration // RUNHUB_LEASE_TTL, -lease-ttl: Redis mode: a run whose executor stops renewing ends after this (default 10s)
	MaxRuns        int           // RUNHUB_MAX_RUNS, -max-runs: runs executing at once in this process (default 100 for a runner, 10000 in a hub)
	NodeID         string        // RUNHUB_NODE_ID, -node-id: Redis mode: this process's lease owner id (default: generated)
	ShutdownGrace  time.Duration // RUNHUB_SHUTDOWN_GRACE, -shutdown-grace: time sockets (hub) or runs (runner) get to finish on shutdown (default 10s)
	LogFormat      string        // RUNHUB_LOG_FORMAT, -log-format: text or json (default text)
	LogLevel       string        // RUNHUB_LOG_LEVEL, -log-level: debug, info, warn, error (default info)
	Profiles       string        // RUNHUB_PROFILES, -profiles: runtime profile file (JSON, docs/profiles.md); empty = the built-in sim profile only
}

// ServeConfig is the configuration of `hub serve`. Every field has a flag
// and an environment variable; a flag wins over the environment.
type ServeConfig struct {
	RuntimeConfig
	Addr           string        // RUNHUB_ADDR, -addr: listen address (default 127.0.0.1:8080)
	Runtime        string        // RUNHUB_RUNTIME, -runtime: inprocess or runners (default: runners with Redis, else inprocess)
	StatusInterval time.Duration // RUNHUB_STATUS_INTERVAL, -status-interval: least time between two statuses of a session (default 100ms)
	Retention      time.Duration // RUNHUB_RETENTION, -retention: how long terminal runs are kept (default 168h; 0 = forever)
	PProf          bool          // RUNHUB_PPROF, -pprof: serve GET /debug/pprof/ (default off; it exposes profiles to anyone who can reach the address)
}

// flagSet defines flags whose defaults come from the environment.
type flagSet struct {
	*flag.FlagSet
	getenv func(string) string
	err    error
}

func newFlagSet(name string, getenv func(string) string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, getenv: getenv}
}

func (f *flagSet) env(name, def string) string {
	if v := f.getenv(name); v != "" {
		return v
	}
	return def
}

func (f *flagSet) str(p *string, flagName, envName, def, usage string) {
	f.StringVar(p, flagName, f.env(envName, def), usage+" ("+envName+")")
}

func (f *flagSet) dur(p *time.Duration, flagName, envName, def, usage string) {
	v, err := time.ParseDuration(f.env(envName, def))
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %v", envName, err)
	}
	f.DurationVar(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) int(p *int, flagName, envName string, def int, usage string) {
	v, err := strconv.Atoi(f.env(envName, strconv.Itoa(def)))
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %v", envName, err)
	}
	f.IntVar(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) bool(p *bool, flagName, envName string, usage string) {
	v, err := strconv.ParseBool(f.env(envName, "false"))
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %v", envName, err)
	}
	f.BoolVar(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) runtime(c *RuntimeConfig, maxRuns int) {
	f.str(&c.Data, "data", "RUNHUB_DATA", "./data", "embedded journal directory")
	f.str(&c.RedisURL, "redis-url", "RUNHUB_REDIS_URL", "", "Redis URL (empty: embedded journal)")
	f.dur(&c.ClarifyTimeout, "clarify-timeout", "RUNHUB_CLARIFY_TIMEOUT", "120s", "clarify prompt expiry")
	f.dur(&c.LeaseTTL, "lease-ttl", "RUNHUB_LEASE_TTL", "10s", "run lease lifetime without renewal")
	f.int(&c.MaxRuns, "max-runs", "RUNHUB_MAX_RUNS", maxRuns, "runs executing at once in this process")
	f.str(&c.NodeID, "node-id", "RUNHUB_NODE_ID", "", "lease owner id of this process")
	f.dur(&c.ShutdownGrace, "shutdown-grace", "RUNHUB_SHUTDOWN_GRACE", "10s", "time to finish on shutdown")
	f.str(&c.LogFormat, "log-format", "RUNHUB_LOG_FORMAT", "text", "text or json")
	f.str(&c.LogLevel, "log-level", "RUNHUB_LOG_LEVEL", "info", "debug, info, warn or error")
	f.str(&c.Profiles, "profiles", "RUNHUB_PROFILES", "", "runtime profile file (JSON)")
}

func (f *flagSet) parse(args []string, c *RuntimeConfig) error {
	if f.err != nil {
		return f.err
	}
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", f.Args())
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("log format %q: want text or json", c.LogFormat)
	}
	if c.LeaseTTL < 300*time.Millisecond {
		return fmt.Errorf("lease TTL %v: want at least 300ms", c.LeaseTTL)
	}
	return nil
}

func parseServeConfig(args []string, getenv func(string) string) (ServeConfig, error) {
	var cfg ServeConfig
	f := newFlagSet("serve", getenv)
	f.runtime(&cfg.RuntimeConfig, 10000)
	f.str(&cfg.Addr, "addr", "RUNHUB_ADDR", "127.0.0.1:8080", "listen address")
	f.str(&cfg.Runtime, "runtime", "RUNHUB_RUNTIME", "", "where runs execute: inprocess or runners")
	f.dur(&cfg.StatusInterval, "status-interval", "RUNHUB_STATUS_INTERVAL", "100ms", "least time between two statuses of a session")
	f.dur(&cfg.Retention, "retention", "RUNHUB_RETENTION", "168h", "how long terminal runs are kept")
	f.bool(&cfg.PProf, "pprof", "RUNHUB_PPROF", "serve GET /debug/pprof/")
	if err := f.parse(args, &cfg.RuntimeConfig); err != nil {
		return cfg, err
	}
	switch cfg.Runtime {
	case "", RuntimeInProcess, RuntimeRunners:
	default:
		return cfg, fmt.Errorf("runtime %q: want inprocess or runners", cfg.Runtime)
	}
	return cfg, nil
}

func parseRunnerConfig(args []string, getenv func(string) string) (RuntimeConfig, error) {
	var cfg RuntimeConfig
	f := newFlagSet("runner", getenv)
	f.runtime(&cfg, 100)
	if err := f.parse(args, &cfg); err != nil {
		return cfg, err
	}
	if cfg.RedisURL == "" {
		return cfg, fmt.Errorf("a runner needs RUNHUB_REDIS_URL")
	}
	return cfg, nil
}
