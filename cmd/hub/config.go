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
	Data            string        // RUNHUB_DATA, -data: directory of the embedded journal (default ./data)
	CommitInterval  time.Duration // RUNHUB_JOURNAL_COMMIT_INTERVAL, -journal-commit-interval: embedded journal: least time between the starts of two commits when appends queue (default 2ms)
	SyncEvery       time.Duration // RUNHUB_JOURNAL_SYNC_EVERY, -journal-sync-every: embedded journal: acknowledge event batches when in the file and fdatasync them within this (default 0: fdatasync every batch first)
	RedisURL        string        // RUNHUB_REDIS_URL, -redis-url: Redis journal and bus; empty = embedded journal
	WaitReplicas    int           // RUNHUB_REDIS_WAIT_REPLICAS, -redis-wait-replicas: replicas every journal append batch waits for (default 0: none)
	WaitTimeout     time.Duration // RUNHUB_REDIS_WAIT_TIMEOUT, -redis-wait-timeout: bound of that wait (default 1s)
	Shards          int           // RUNHUB_REDIS_SHARDS, -redis-shards: journal shards (feed partitions) on Redis, the same on every process (default 16)
	FeedInterval    time.Duration // RUNHUB_REDIS_FEED_INTERVAL, -redis-feed-interval: least time between two status feed records of a run's deltas (default 1s; 0: every event)
	ClarifyTimeout  time.Duration // RUNHUB_CLARIFY_TIMEOUT, -clarify-timeout: clarify prompt expiry (default 120s)
	ApprovalTimeout time.Duration // RUNHUB_APPROVAL_TIMEOUT, -approval-timeout: approval prompt expiry, then denied (default 0: never)
	RunStartTimeout time.Duration // RUNHUB_RUN_START_TIMEOUT, -run-start-timeout: Redis mode: a run no runner starts within this ends with error no_runner (default 10m; 0: never)
	LeaseTTL        time.Duration // RUNHUB_LEASE_TTL, -lease-ttl: Redis mode: a run whose executor stops renewing ends after this (default 10s)
	MaxRuns         int           // RUNHUB_MAX_RUNS, -max-runs: runs executing at once in this process (default 100 for a runner, 10000 in a hub)
	NodeID          string        // RUNHUB_NODE_ID, -node-id: Redis mode: this process's lease owner id (default: generated)
	ShutdownGrace   time.Duration // RUNHUB_SHUTDOWN_GRACE, -shutdown-grace: time the runs executing here get to finish on SIGTERM (default 2m, drain.go)
	LogFormat       string        // RUNHUB_LOG_FORMAT, -log-format: text or json (default text)
	LogLevel        string        // RUNHUB_LOG_LEVEL, -log-level: debug, info, warn, error (default info)
	Profiles        string        // RUNHUB_PROFILES, -profiles: runtime profile file (JSON, docs/profiles.md); empty = the built-in sim profile only
	MetricsAddr     string        // RUNHUB_METRICS_ADDR, -metrics-addr: serve /metrics, /healthz and /readyz on this address (hub default: /metrics on the main address; runner default: no HTTP)

	metricsAddrFrom string // where MetricsAddr came from, for errors: "-metrics-addr" or "RUNHUB_METRICS_ADDR"
	dataFrom        string // where Data came from: "-data" or "RUNHUB_DATA"
	outbox          bool   // record notable events in the journal's outbox (webhooks on)
}

// ServeConfig is the configuration of `hub serve`. Every field has a flag
// and an environment variable; a flag wins over the environment.
type ServeConfig struct {
	RuntimeConfig
	Addr           string        // RUNHUB_ADDR, -addr: listen address (default 127.0.0.1:8080)
	Runtime        string        // RUNHUB_RUNTIME, -runtime: inprocess or runners (default: runners with Redis, else inprocess)
	StatusInterval time.Duration // RUNHUB_STATUS_INTERVAL, -status-interval: least time between two progress-only statuses of a session; other changes go out at once (default 1s)
	Retention      time.Duration // RUNHUB_RETENTION, -retention: how long terminal runs are kept (default 168h; 0 = forever)
	PProf          bool          // RUNHUB_PPROF, -pprof: serve GET /debug/pprof/ (default off; with authentication on, only to a token with the admin role)
	Security
	WebUI    WebUIConfig // hermes-webui's runner API (docs/hermes-webui.md)
	Webhooks WebhookConfig
	Durable  DurableConfig // the Durable Streams edge (durable.go)

	addrFrom string // where Addr came from, for errors: "-addr" or "RUNHUB_ADDR"
}

// Security is the authentication, origin and limit configuration of `hub
// serve` (docs/protocol.md §5.9, README).
type Security struct {
	JWTSecret      string        // RUNHUB_JWT_SECRET (environment only, never a flag): HS256 shared secret, at least 32 bytes
	JWTPublicKey   string        // RUNHUB_JWT_PUBLIC_KEY, -jwt-public-key: PEM file of the RS256 (RSA) or ES256 (P-256) verification key
	JWTIssuer      string        // RUNHUB_JWT_ISSUER, -jwt-issuer: required iss (default: not checked)
	JWTAudience    string        // RUNHUB_JWT_AUDIENCE, -jwt-audience: required aud (default: not checked)
	JWTLeeway      time.Duration // RUNHUB_JWT_LEEWAY, -jwt-leeway: clock skew allowed on exp/nbf/iat (default 30s)
	InsecureListen bool          // RUNHUB_INSECURE_LISTEN, -insecure-listen: allow a non-loopback address without a JWT key (default off)
	AllowedOrigins string        // RUNHUB_ALLOWED_ORIGINS, -allowed-origins: comma-separated browser origin patterns besides same-origin (default none)
	WSRate         float64       // RUNHUB_WS_RATE, -ws-rate: client messages per second per socket (default 50; negative: no limit)
	WSBurst        int           // RUNHUB_WS_BURST, -ws-burst: burst of the socket rate limit (default 100)
	MaxSockets     int           // RUNHUB_MAX_SOCKETS_PER_SUBJECT, -max-sockets-per-subject: open sockets per subject over all hubs sharing Redis (default 64 with a JWT key, none open; negative: no limit)
	MaxRunsPerSub  int           // RUNHUB_MAX_RUNS_PER_SUBJECT, -max-runs-per-subject: active runs per subject (default 32 with a JWT key, none open; negative: no limit)
	HelloTimeout   time.Duration // RUNHUB_HELLO_TIMEOUT, -hello-timeout: time from the upgrade to the first valid hello (default 10s; negative: no bound)
	FrameTimeout   time.Duration // RUNHUB_FRAME_TIMEOUT, -frame-timeout: time from a client frame's first byte to its last, and a fragmented message's (default 10s; negative: no bound)
}

// security defines the Security flags.
func (f *flagSet) security(c *Security) {
	c.JWTSecret = f.secretEnv("RUNHUB_JWT_SECRET", "HS256 shared secret of bearer tokens, at least 32 bytes (environment only: a flag would show in ps)")
	f.str(&c.JWTPublicKey, "jwt-public-key", "RUNHUB_JWT_PUBLIC_KEY", "", "PEM file of the RS256 or ES256 key that verifies bearer tokens")
	f.str(&c.JWTIssuer, "jwt-issuer", "RUNHUB_JWT_ISSUER", "", "required token issuer, iss (empty: not checked)")
	f.str(&c.JWTAudience, "jwt-audience", "RUNHUB_JWT_AUDIENCE", "", "required token audience, aud (empty: not checked)")
	f.dur(&c.JWTLeeway, "jwt-leeway", "RUNHUB_JWT_LEEWAY", "30s", "clock skew allowed on token times")
	f.bool(&c.InsecureListen, "insecure-listen", "RUNHUB_INSECURE_LISTEN", "allow a non-loopback address without a JWT key (anyone who reaches it is subject local)")
	f.str(&c.AllowedOrigins, "allowed-origins", "RUNHUB_ALLOWED_ORIGINS", "", "comma-separated browser origin patterns allowed besides same-origin")
	f.float(&c.WSRate, "ws-rate", "RUNHUB_WS_RATE", "50", "client messages per second per socket (negative: no limit)")
	f.int(&c.WSBurst, "ws-burst", "RUNHUB_WS_BURST", 100, "burst of the socket message rate")
	f.int(&c.MaxSockets, "max-sockets-per-subject", "RUNHUB_MAX_SOCKETS_PER_SUBJECT", 0, "open sockets per subject, over every hub sharing the Redis journal, else on this hub (0: 64 with a JWT key, no limit when open; negative: no limit)")
	f.int(&c.MaxRunsPerSub, "max-runs-per-subject", "RUNHUB_MAX_RUNS_PER_SUBJECT", 0, "active runs per subject (0: 32 with a JWT key, no limit when open; negative: no limit)")
	f.dur(&c.HelloTimeout, "hello-timeout", "RUNHUB_HELLO_TIMEOUT", "10s", "time from the WebSocket upgrade to the first valid hello; then error protocol_error and close 4400 (negative: no bound)")
	f.dur(&c.FrameTimeout, "frame-timeout", "RUNHUB_FRAME_TIMEOUT", "10s", "time from a client frame's first byte to its last (and from a fragmented message's first byte to its end); then close 1008 (negative: no bound)")
}

// flagSet defines flags whose defaults come from the environment. It
// remembers each flag's variable, and the variables without a flag, so the
// configuration reference (docs/configuration.md) is generated from it.
type flagSet struct {
	*flag.FlagSet
	getenv  func(string) string
	err     error
	envOf   map[string]string // flag name → environment variable
	defOf   map[string]string // flag name → default as written in the code
	envOnly []envSetting      // variables without a flag
}

// envSetting is an environment variable without a flag.
type envSetting struct{ name, usage string }

func newFlagSet(name string, getenv func(string) string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, getenv: getenv, envOf: map[string]string{}, defOf: map[string]string{}}
}

// secretEnv reads a variable that has no flag (a secret).
func (f *flagSet) secretEnv(name, usage string) string {
	f.envOnly = append(f.envOnly, envSetting{name, usage})
	return f.getenv(name)
}

func (f *flagSet) env(name, def string) string {
	if v := f.getenv(name); v != "" {
		return v
	}
	return def
}

// source names where a flag's value came from, for an error message: the
// flag when the command line set it, else its environment variable.
func (f *flagSet) source(flagName string) string {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == flagName })
	if env := f.envOf[flagName]; !set && env != "" {
		return env
	}
	return "-" + flagName
}

func (f *flagSet) str(p *string, flagName, envName, def, usage string) {
	f.envOf[flagName], f.defOf[flagName] = envName, def
	f.StringVar(p, flagName, f.env(envName, def), usage+" ("+envName+")")
}

func (f *flagSet) dur(p *time.Duration, flagName, envName, def, usage string) {
	f.envOf[flagName], f.defOf[flagName] = envName, def
	raw := f.env(envName, def)
	v, err := time.ParseDuration(raw)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s %q: want %s", envName, raw, expectedForm("duration"))
	}
	f.DurationVar(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) int(p *int, flagName, envName string, def int, usage string) {
	f.envOf[flagName], f.defOf[flagName] = envName, strconv.Itoa(def)
	raw := f.env(envName, strconv.Itoa(def))
	v, err := strconv.Atoi(raw)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s %q: want %s", envName, raw, expectedForm("int"))
	}
	f.IntVar(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) float(p *float64, flagName, envName, def, usage string) {
	f.envOf[flagName], f.defOf[flagName] = envName, def
	raw := f.env(envName, def)
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s %q: want %s", envName, raw, expectedForm("float"))
	}
	f.Float64Var(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) bool(p *bool, flagName, envName string, usage string) {
	f.envOf[flagName], f.defOf[flagName] = envName, "false"
	raw := f.env(envName, "false")
	v, err := strconv.ParseBool(raw)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s %q: want %s", envName, raw, expectedForm(""))
	}
	f.BoolVar(p, flagName, v, usage+" ("+envName+")")
}

func (f *flagSet) runtime(c *RuntimeConfig, maxRuns int) {
	f.str(&c.Data, "data", "RUNHUB_DATA", "./data", "directory of the embedded (bbolt) journal, when RUNHUB_REDIS_URL is empty")
	f.dur(&c.CommitInterval, "journal-commit-interval", "RUNHUB_JOURNAL_COMMIT_INTERVAL", "2ms", "embedded journal: when appends queued while a commit (one write and one fdatasync of the event log) ran, the next commit starts this long after the start of that one, taking what queued meanwhile: under many concurrent runs about one fdatasync per interval (a commit that left nothing queued lets the next start at once), each append waiting at most this much longer. Writers that each wait for their append (one run streaming as fast as it can) are never held back. 0: commit as soon as the previous commit ends")
	f.dur(&c.SyncEvery, "journal-sync-every", "RUNHUB_JOURNAL_SYNC_EVERY", "0", "embedded journal: acknowledge a batch of events as soon as it is in the file (a crash of the process loses nothing) and fdatasync it within this; a crash of the machine can lose that much. 0: fdatasync every batch before acknowledging it")
	f.str(&c.RedisURL, "redis-url", "RUNHUB_REDIS_URL", "", "Redis URL of the shared journal, bus and run queue: redis://, rediss://, unix://, or redis+cluster://host:port,host:port… for a Redis Cluster (empty: the embedded journal)")
	f.int(&c.WaitReplicas, "redis-wait-replicas", "RUNHUB_REDIS_WAIT_REPLICAS", 0, "Redis mode: after each journal append batch, WAIT until this many replicas of its master have it, so a failover loses no acknowledged event (0: no WAIT; docs/operations.md)")
	f.dur(&c.WaitTimeout, "redis-wait-timeout", "RUNHUB_REDIS_WAIT_TIMEOUT", "1s", "Redis mode: how long an append batch waits for RUNHUB_REDIS_WAIT_REPLICAS replicas before its appends fail (and are retried)")
	f.int(&c.Shards, "redis-shards", "RUNHUB_REDIS_SHARDS", 16, "Redis mode: the journal's shards, each one hash-tagged slot with its status feed partition: use at least a few per Cluster master (1–1024). The same on every hub and runner of a journal, for its whole life: a process with another value finds neither the sessions nor the runs of the others")
	f.dur(&c.FeedInterval, "redis-feed-interval", "RUNHUB_REDIS_FEED_INTERVAL", "1s", "Redis mode: the status feed every hub reads for the sessions its tabs watch carries a run's deltas (tokens, reasoning, tool output) at most once per this, counted, and every other event at once (0: every event; docs/operations.md). Set it on the hubs and runners alike, at most the hub's -status-interval")
	f.dur(&c.ClarifyTimeout, "clarify-timeout", "RUNHUB_CLARIFY_TIMEOUT", "120s", "how long a clarify prompt waits for an answer")
	f.dur(&c.ApprovalTimeout, "approval-timeout", "RUNHUB_APPROVAL_TIMEOUT", "0s", "how long an approval prompt waits for an answer; then it expires as denied (0: as long as the run)")
	f.dur(&c.RunStartTimeout, "run-start-timeout", "RUNHUB_RUN_START_TIMEOUT", "10m", "Redis mode: a run that no runner (or hub) starts within this ends with one error no_runner (same on every process; 0: never)")
	f.dur(&c.LeaseTTL, "lease-ttl", "RUNHUB_LEASE_TTL", "10s", "Redis mode: a run whose executor stops renewing its lease ends interrupted after this (same on every process)")
	f.int(&c.MaxRuns, "max-runs", "RUNHUB_MAX_RUNS", maxRuns, "runs executing at once in this process")
	f.str(&c.NodeID, "node-id", "RUNHUB_NODE_ID", "", "Redis mode: this process's lease owner id, unique per process (empty: generated)")
	f.dur(&c.ShutdownGrace, "shutdown-grace", "RUNHUB_SHUTDOWN_GRACE", defaultShutdownGrace, "after SIGTERM, time the runs executing in this process get to finish while new runs are refused (503); then those still going end interrupted (a hub leaves a Hermes run going, to re-attach it at its next start) and a hub's sockets get goaway and up to 10s to close. A second signal stops at once")
	f.str(&c.LogFormat, "log-format", "RUNHUB_LOG_FORMAT", "text", "log format: text (development) or json (production)")
	f.str(&c.LogLevel, "log-level", "RUNHUB_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	f.str(&c.Profiles, "profiles", "RUNHUB_PROFILES", "", "runtime profile file, JSON (docs/profiles.md; empty: the simulator only)")
}

func (f *flagSet) parse(args []string, c *RuntimeConfig) error {
	if err := parseFlags(f, args); err != nil {
		return err
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("%s %q: want text or json", f.source("log-format"), c.LogFormat)
	}
	if _, ok := parseLevel(c.LogLevel); !ok {
		return fmt.Errorf("%s %q: want debug, info, warn or error", f.source("log-level"), c.LogLevel)
	}
	for name, d := range map[string]time.Duration{"approval-timeout": c.ApprovalTimeout, "run-start-timeout": c.RunStartTimeout} {
		if d < 0 {
			return fmt.Errorf("%s %v: want 0 (none) or a positive duration", f.source(name), d)
		}
	}
	if c.CommitInterval < 0 || c.CommitInterval > time.Second {
		return fmt.Errorf("%s %v: want 0 (commit at once) up to 1s", f.source("journal-commit-interval"), c.CommitInterval)
	}
	if c.LeaseTTL < 300*time.Millisecond {
		return fmt.Errorf("%s %v: want at least 300ms", f.source("lease-ttl"), c.LeaseTTL)
	}
	if c.WaitReplicas < 0 {
		return fmt.Errorf("%s %d: want 0 (no WAIT) or more replicas", f.source("redis-wait-replicas"), c.WaitReplicas)
	}
	if c.Shards < 1 || c.Shards > 1024 {
		return fmt.Errorf("%s %d: want 1 up to 1024", f.source("redis-shards"), c.Shards)
	}
	if c.FeedInterval < 0 || c.FeedInterval > time.Minute {
		return fmt.Errorf("%s %v: want 0 (every event) up to 1m", f.source("redis-feed-interval"), c.FeedInterval)
	}
	if c.WaitTimeout <= 0 {
		return fmt.Errorf("%s %v: want a positive duration", f.source("redis-wait-timeout"), c.WaitTimeout)
	}
	if err := f.checkBounds(c); err != nil {
		return err
	}
	c.metricsAddrFrom, c.dataFrom = f.source("metrics-addr"), f.source("data")
	if c.MetricsAddr != "" {
		return checkAddr(c.metricsAddrFrom, c.MetricsAddr)
	}
	return nil
}

// serveFlags defines the flags of `hub serve` on cfg.
func serveFlags(cfg *ServeConfig, getenv func(string) string) *flagSet {
	f := newFlagSet("serve", getenv)
	f.runtime(&cfg.RuntimeConfig, 10000)
	f.str(&cfg.MetricsAddr, "metrics-addr", "RUNHUB_METRICS_ADDR", "", "serve /metrics on this address instead of the main one, with /healthz and /readyz (empty: /metrics on the main address)")
	f.str(&cfg.Addr, "addr", "RUNHUB_ADDR", "127.0.0.1:8080", "listen address")
	f.str(&cfg.Runtime, "runtime", "RUNHUB_RUNTIME", "", "where runs execute: inprocess or runners (empty: runners with Redis, else inprocess)")
	f.dur(&cfg.StatusInterval, "status-interval", "RUNHUB_STATUS_INTERVAL", "1s", "least time between two statuses of a session that change only its progress (tokens, last_seq, updated_at, progress); other changes go out at once")
	f.dur(&cfg.Retention, "retention", "RUNHUB_RETENTION", "168h", "how long terminal runs are kept (0: forever)")
	f.bool(&cfg.PProf, "pprof", "RUNHUB_PPROF", "serve GET /debug/pprof/ (with authentication on, only to a token with the admin role)")
	f.security(&cfg.Security)
	f.webui(&cfg.WebUI)
	f.webhooks(&cfg.Webhooks)
	f.durable(&cfg.Durable)
	return f
}

func parseServeConfig(args []string, getenv func(string) string) (ServeConfig, error) {
	var cfg ServeConfig
	f := serveFlags(&cfg, getenv)
	if err := f.parse(args, &cfg.RuntimeConfig); err != nil {
		return cfg, err
	}
	if err := cfg.Webhooks.parse(f); err != nil {
		return cfg, err
	}
	if err := cfg.Durable.check(f); err != nil {
		return cfg, err
	}
	cfg.outbox = cfg.Webhooks.enabled()
	cfg.addrFrom = f.source("addr")
	if err := checkAddr(cfg.addrFrom, cfg.Addr); err != nil {
		return cfg, err
	}
	if err := cfg.WebUI.check(); err != nil {
		return cfg, err
	}
	if cfg.JWTSecret != "" && cfg.JWTPublicKey != "" {
		return cfg, fmt.Errorf("set RUNHUB_JWT_SECRET or RUNHUB_JWT_PUBLIC_KEY, not both")
	}
	if err := f.checkServeBounds(&cfg); err != nil {
		return cfg, err
	}
	switch cfg.Runtime {
	case "", RuntimeInProcess, RuntimeRunners:
	default:
		return cfg, fmt.Errorf("runtime %q: want inprocess or runners", cfg.Runtime)
	}
	return cfg, nil
}

// runnerFlags defines the flags of `hub runner` on cfg.
func runnerFlags(cfg *RuntimeConfig, getenv func(string) string) *flagSet {
	f := newFlagSet("runner", getenv)
	f.runtime(cfg, 100)
	f.str(&cfg.MetricsAddr, "metrics-addr", "RUNHUB_METRICS_ADDR", "", "serve /metrics, /healthz and /readyz on this address (empty: no HTTP)")
	return f
}

func parseRunnerConfig(args []string, getenv func(string) string) (RuntimeConfig, error) {
	var cfg RuntimeConfig
	f := runnerFlags(&cfg, getenv)
	if err := f.parse(args, &cfg); err != nil {
		return cfg, err
	}
	if cfg.RedisURL == "" {
		return cfg, fmt.Errorf("a runner needs RUNHUB_REDIS_URL")
	}
	return cfg, nil
}

// HealthcheckConfig is the configuration of `hub healthcheck`.
type HealthcheckConfig struct {
	URL     string        // RUNHUB_HEALTHCHECK_URL, -url: the URL to GET (default: /healthz of RUNHUB_METRICS_ADDR, else of RUNHUB_ADDR, over loopback)
	Timeout time.Duration // RUNHUB_HEALTHCHECK_TIMEOUT, -timeout: how long to wait for the answer (default 3s)
}

// healthcheckFlags defines the flags of `hub healthcheck` on cfg.
func healthcheckFlags(cfg *HealthcheckConfig, getenv func(string) string) *flagSet {
	f := newFlagSet("healthcheck", getenv)
	addr := getenv("RUNHUB_METRICS_ADDR") // a runner's only HTTP; a hub serves /healthz there too
	if addr == "" {
		addr = getenv("RUNHUB_ADDR")
	}
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	f.str(&cfg.URL, "url", "RUNHUB_HEALTHCHECK_URL", defaultHealthURL(addr), "URL to GET; 200 is healthy (default: /healthz of RUNHUB_METRICS_ADDR, else of RUNHUB_ADDR)")
	f.dur(&cfg.Timeout, "timeout", "RUNHUB_HEALTHCHECK_TIMEOUT", "3s", "how long to wait for the answer")
	return f
}

func parseHealthcheckConfig(args []string, getenv func(string) string) (HealthcheckConfig, error) {
	var cfg HealthcheckConfig
	f := healthcheckFlags(&cfg, getenv)
	if err := parseFlags(f, args); err != nil {
		return cfg, err
	}
	if cfg.Timeout <= 0 {
		return cfg, fmt.Errorf("%s %v: want a positive duration", f.source("timeout"), cfg.Timeout)
	}
	return cfg, nil
}
