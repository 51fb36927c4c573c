package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds: the generator refuses to go beyond these.
const (
	maxSockets  = 60000
	maxDuration = 30 * time.Minute
	maxRuns     = 5000
	maxSessions = 20000
	maxTokens   = 1_000_000
)

// config is the command line.
type config struct {
	Target        string        `json:"target"`
	Spawn         bool          `json:"spawn"`
	SpawnRedis    bool          `json:"spawn_redis"`
	RedisCluster  bool          `json:"redis_cluster,omitempty"`
	Hubs          int           `json:"hubs"`
	HubBin        string        `json:"-"`
	Floor         bool          `json:"floor,omitempty"`
	FloorWrite    string        `json:"floor_write,omitempty"`
	FloorJournal  bool          `json:"floor_journal,omitempty"`
	HubEnv        []string      `json:"hub_env,omitempty"`
	HubPID        int           `json:"hub_pid,omitempty"`
	DataDir       string        `json:"data_dir,omitempty"`
	Tabs          int           `json:"tabs"`
	Watch         int           `json:"watch"`
	Sessions      int           `json:"sessions"`
	FocusEvery    time.Duration `json:"focus_every"`
	FocusAll      bool          `json:"focus_all"`
	Runs          int           `json:"runs"`
	RunRate       float64       `json:"run_rate"`
	Tokens        int           `json:"tokens"`
	TokenMS       int           `json:"token_ms"`
	Tools         int           `json:"tools"`
	Warmup        time.Duration `json:"warmup"`
	Duration      time.Duration `json:"duration"`
	Settle        time.Duration `json:"settle"`
	ConnectRate   float64       `json:"connect_rate"`
	ConnectConc   int           `json:"connect_concurrency"`
	Replay        int           `json:"replay_events"`
	CompactReplay bool          `json:"compact_replay"`
	FullDecode    bool          `json:"full_decode,omitempty"`
	ReplayFocuses int           `json:"replay_focuses"`
	JSONOut       string        `json:"-"`
	CPUProfile    string        `json:"-"`
	HeapProfile   string        `json:"-"`
	Quiet         bool          `json:"-"`
	Scenario      string        `json:"scenario,omitempty"`

	// -compare centrifugo (compare.go).
	Compare       string        `json:"compare,omitempty"`
	CentrifugoBin string        `json:"-"`
	Rounds        int           `json:"rounds,omitempty"`
	HubProcs      string        `json:"hub_procs,omitempty"`
	CompareFloor  bool          `json:"compare_floor,omitempty"`
	FloorBin      string        `json:"-"`
	CFProcs       int           `json:"centrifugo_procs,omitempty"`
	CFPublishers  int           `json:"centrifugo_publishers,omitempty"`
	CFHistory     int           `json:"centrifugo_history_size,omitempty"`
	CFHistoryTTL  time.Duration `json:"centrifugo_history_ttl,omitempty"`
	CFIdle        bool          `json:"centrifugo_idle,omitempty"` // -centrifugo-idle (cfidle.go)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.StringVar(&c.Target, "target", "127.0.0.1:8080", "hub address (host:port, loopback only; comma-separated for several replicas)")
	fs.BoolVar(&c.Spawn, "spawn", false, "start a hub (embedded journal, temp dir, free loopback port) and measure it")
	fs.BoolVar(&c.SpawnRedis, "spawn-redis", false, "start redis-server, -hubs hubs (RUNHUB_RUNTIME=runners) and one runner, and measure them")
	fs.BoolVar(&c.RedisCluster, "redis-cluster", false, "with -spawn-redis: a Redis Cluster of 3 masters and 3 replicas on loopback (redis-cli --cluster create) instead of one redis-server; its nodes' CPU and memory count in the report")
	fs.IntVar(&c.Hubs, "hubs", 2, "hub replicas with -spawn-redis")
	fs.StringVar(&c.HubBin, "hub-bin", "", "hub binary for -spawn/-spawn-redis (default: go build ./cmd/hub)")
	fs.BoolVar(&c.Floor, "floor", false, "with -spawn: measure loadtest/floorhub (one write per delivery, no journal unless -floor-journal) instead of the hub")
	fs.StringVar(&c.FloorWrite, "floor-write", "raw", "with -floor: how floorhub writes a frame: raw (one net.Conn.Write) or lib (coder/websocket)")
	fs.BoolVar(&c.FloorJournal, "floor-journal", false, "with -floor: floorhub journals every event before writing it, one write + one fdatasync per batch, in the spawned data directory (under -data)")
	hubEnv := listFlag{}
	fs.Var(&hubEnv, "hub-env", "KEY=VALUE for spawned hubs (repeatable), e.g. RUNHUB_STATUS_INTERVAL=200ms")
	fs.StringVar(&c.DataDir, "data", "", "with -spawn: the directory under which the hub's journal goes (default $TMPDIR; /dev/shm takes the disk's fsync out of the figures)")
	fs.IntVar(&c.HubPID, "hub-pid", 0, "pid of the hub under test, for CPU and RSS from /proc (set by -spawn)")
	fs.IntVar(&c.Tabs, "tabs", 100, "tab sockets")
	fs.IntVar(&c.Watch, "watch", 10, "sessions each tab watches")
	fs.IntVar(&c.Sessions, "sessions", 0, "sessions to create (default: max(runs, watch, 1))")
	fs.DurationVar(&c.FocusEvery, "focus-every", 10*time.Second, "each tab moves its focus to its next watched session this often (0: never)")
	fs.BoolVar(&c.FocusAll, "focus-all", false, "every token to every tab: each tab opens one extra socket per other watched session, each focusing it")
	fs.IntVar(&c.Runs, "runs", 20, "concurrent simulated runs (one per session, restarted when they end); 0: idle")
	fs.Float64Var(&c.RunRate, "run-rate", 50, "most runs started per second")
	fs.IntVar(&c.Tokens, "tokens", 200, "metadata.sim.tokens per run")
	fs.IntVar(&c.TokenMS, "token-ms", 20, "metadata.sim.token_ms (pause between tokens)")
	fs.IntVar(&c.Tools, "tools", 0, "metadata.sim.tools per run")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "time after the runs start before measuring")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "measurement time")
	fs.DurationVar(&c.Settle, "settle", 2*time.Second, "pause after connecting, before the idle memory reading")
	fs.Float64Var(&c.ConnectRate, "connect-rate", 2000, "sockets opened per second")
	fs.IntVar(&c.ConnectConc, "connect-concurrency", 64, "sockets being opened at once")
	fs.BoolVar(&c.CompactReplay, "compact-replay", true, "tabs take compacted catch-up (hello capability compact_replay), as the workbench does; false: every replayed event on its own, as older clients")
	fs.BoolVar(&c.FullDecode, "full-decode", false, "sockets also decode each event's whole message with encoding/json into a generic value, as a naive client would, after taking its receipt time (the same for the hub's tabs and Centrifugo's sockets)")
	fs.IntVar(&c.Replay, "replay", 0, "before the tabs: journal one run of this many tokens (token_ms 0) and time focusing it")
	fs.IntVar(&c.ReplayFocuses, "replay-focuses", 10, "focuses timed by -replay")
	fs.StringVar(&c.JSONOut, "json", "", "write the report as JSON to this file ('-': stdout)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "save a CPU profile of the (first) hub over the measurement (needs RUNHUB_PPROF; on with -spawn)")
	fs.StringVar(&c.HeapProfile, "heapprofile", "", "save a heap profile of the (first) hub once the sockets are idle (needs RUNHUB_PPROF; on with -spawn)")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines")
	fs.StringVar(&c.Scenario, "scenario", "", "preset: 'centrifugo' (1,000 tabs each focusing one of 200 runs, 50 tokens/s, no switching, -spawn); flags given explicitly override it")
	fs.StringVar(&c.Compare, "compare", "", "'centrifugo': run the workload (-scenario centrifugo unless another is given) against Centrifugo and the spawned hub, alternating, and print a markdown table with hub/Centrifugo ratios")
	fs.StringVar(&c.CentrifugoBin, "centrifugo", "", "with -compare: the Centrifugo binary (default $CENTRIFUGO, else centrifugo on PATH, else $GOPATH/bin; none: skipped)")
	fs.IntVar(&c.Rounds, "rounds", 1, "with -compare: rounds, each Centrifugo (then the floor with -compare-floor) then the hub at each -hub-procs")
	fs.StringVar(&c.HubProcs, "hub-procs", "0", "with -compare: GOMAXPROCS of the hub, comma-separated (e.g. 1,2; 0: the runtime's default)")
	fs.BoolVar(&c.CompareFloor, "compare-floor", false, "with -compare: each round also runs the floor (loadtest/floorhub as -floor spawns it: raw writes, no journal, default GOMAXPROCS) after Centrifugo, and the table gives hub CPU per delivery ÷ the floor's")
	fs.StringVar(&c.FloorBin, "floor-bin", "", "with -compare-floor: the floorhub binary (default: go build ./loadtest/floorhub, once)")
	fs.BoolVar(&c.CFIdle, "centrifugo-idle", false, "measure Centrifugo's memory per idle socket in this setup instead of the hub's: -tabs sockets, each subscribed to the channels of the -watch of -sessions its tab would watch, no publications; RSS before the sockets and -settle after the last one connected (binary as -centrifugo; -spawn not needed)")
	fs.IntVar(&c.CFProcs, "centrifugo-procs", 0, "with -compare: GOMAXPROCS of Centrifugo (0: its default)")
	fs.IntVar(&c.CFPublishers, "centrifugo-publishers", 4, "with -compare: goroutines publishing to Centrifugo over /api/batch, each owning every n-th channel")
	fs.IntVar(&c.CFHistory, "centrifugo-history", 3000, "with -compare: history_size of Centrifugo's channels")
	fs.DurationVar(&c.CFHistoryTTL, "centrifugo-history-ttl", 5*time.Minute, "with -compare: history_ttl of Centrifugo's channels")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadtest [flags]  (see loadtest/README.md)\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.HubEnv = hubEnv
	if c.Compare != "" && c.Scenario == "" {
		c.Scenario = "centrifugo"
	}
	if err := applyScenario(fs, c.Scenario); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if c.Sessions == 0 {
		c.Sessions = max(c.Runs, c.Watch, 1)
	}
	switch {
	case c.Tabs < 0 || c.Watch < 0 || c.Runs < 0 || c.Tokens < 0 || c.TokenMS < 0 || c.Tools < 0 || c.Replay < 0:
		return c, fmt.Errorf("counts must not be negative")
	case c.Watch > c.Sessions:
		return c, fmt.Errorf("-watch %d > -sessions %d", c.Watch, c.Sessions)
	case c.Runs > c.Sessions:
		return c, fmt.Errorf("-runs %d > -sessions %d: each run needs a session of its own", c.Runs, c.Sessions)
	case c.sockets() > maxSockets:
		return c, fmt.Errorf("%d sockets: at most %d", c.sockets(), maxSockets)
	case c.Runs > maxRuns || c.Sessions > maxSessions || c.Tokens > maxTokens || c.Replay > maxTokens:
		return c, fmt.Errorf("at most %d runs, %d sessions, %d tokens", maxRuns, maxSessions, maxTokens)
	case c.Duration <= 0 || c.Duration > maxDuration || c.Warmup < 0 || c.Warmup > maxDuration:
		return c, fmt.Errorf("-duration must be in (0, %v], -warmup in [0, %v]", maxDuration, maxDuration)
	case c.RunRate <= 0 || c.ConnectRate <= 0 || c.ConnectConc <= 0:
		return c, fmt.Errorf("rates and concurrency must be positive")
	case c.Spawn && c.SpawnRedis:
		return c, fmt.Errorf("-spawn and -spawn-redis exclude each other")
	case c.Floor && !c.Spawn:
		return c, fmt.Errorf("-floor needs -spawn (the centrifugo scenario sets it)")
	case c.FloorJournal && !c.Floor:
		return c, fmt.Errorf("-floor-journal needs -floor")
	case c.FloorWrite != "raw" && c.FloorWrite != "lib":
		return c, fmt.Errorf("-floor-write %q: want raw or lib", c.FloorWrite)
	case c.RedisCluster && !c.SpawnRedis:
		return c, fmt.Errorf("-redis-cluster needs -spawn-redis")
	case c.SpawnRedis && (c.Hubs < 1 || c.Hubs > 8):
		return c, fmt.Errorf("-hubs must be 1..8")
	case c.ReplayFocuses < 1 || c.ReplayFocuses > 1000:
		return c, fmt.Errorf("-replay-focuses must be 1..1000")
	}
	if err := c.checkCompare(); err != nil {
		return c, err
	}
	if !c.Spawn && !c.SpawnRedis {
		for _, t := range strings.Split(c.Target, ",") {
			if err := checkLoopback(t); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// scenarios are named presets of flags. centrifugo is the workload
// Centrifugo's own load test uses (1,000 subscribers, 200 channels × 50
// messages/s, 5 subscribers per channel): each tab watches and focuses one
// session for the whole test, and each run is long enough (3,000 tokens,
// 60 s at 50 tokens/s) not to end during warmup and measurement, so there
// is no refocus and no replay.
var scenarios = map[string][][2]string{
	"centrifugo": {
		{"spawn", "true"}, {"tabs", "1000"}, {"watch", "1"}, {"sessions", "200"}, {"runs", "200"},
		{"tokens", "3000"}, {"token-ms", "20"}, {"focus-every", "0"}, {"warmup", "5s"}, {"duration", "30s"},
	},
}

// applyScenario sets the flags of a named preset that were not given on the
// command line.
func applyScenario(fs *flag.FlagSet, name string) error {
	if name == "" {
		return nil
	}
	preset, ok := scenarios[name]
	if !ok {
		return fmt.Errorf("-scenario %q: unknown (known: centrifugo)", name)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, kv := range preset {
		if given[kv[0]] {
			continue
		}
		if err := fs.Set(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// sockets is the number of tab sockets (extra ones with -focus-all).
func (c *config) sockets() int {
	if c.FocusAll && c.Watch > 1 {
		return c.Tabs * c.Watch
	}
	return c.Tabs
}

// gen is one load test.
type gen struct {
	cfg        config
	c          counters
	shards     [nShards]shard
	socks      []*sock
	measuring  atomic.Bool
	closing    atomic.Bool
	hc         *http.Client
	apis       []*api
	targets    []string
	pids       []namedPID
	pprofBase  string
	connsIdle0 int // sockets open on the first hub after connecting

	errMu   sync.Mutex
	errs    map[string]int
	errList []string
}

// noteErr keeps the first 20 distinct error texts and counts all.
func (g *gen) noteErr(s string) {
	if len(s) > 300 {
		s = s[:300]
	}
	g.errMu.Lock()
	defer g.errMu.Unlock()
	if _, ok := g.errs[s]; !ok && len(g.errList) < 20 {
		g.errList = append(g.errList, s)
	}
	g.errs[s]++
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A hard bound on the whole test, whatever happens.
	ctx, cancel := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration+15*time.Minute)
	defer cancel()
	if cfg.Compare != "" {
		os.Exit(mainCompare(cfg))
	}
	if cfg.CFIdle {
		if err := centrifugoIdle(ctx, cfg, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
		return
	}
	rep, err := run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
	if rep.Dups > 0 || rep.Gaps > 0 {
		os.Exit(3)
	}
}

// raiseNoFile lifts the open-file limit to what the sockets need, as far
// as the hard limit (or, as root, beyond it) allows.
func raiseNoFile(need uint64) {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return
	}
	if r.Cur >= need {
		return
	}
	want := syscall.Rlimit{Cur: need, Max: max(r.Max, need)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		want = syscall.Rlimit{Cur: r.Max, Max: r.Max}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	}
}

func noFile() uint64 {
	var r syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	return r.Cur
}

func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // loopback only, never through a proxy
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}
