package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// benchRow is one measured run of the comparison (-compare centrifugo):
// the same figures for either server.
type benchRow struct {
	Round            int      `json:"round"`
	Target           string   `json:"target"`     // "centrifugo", "floor" or "hub"
	Procs            int      `json:"gomaxprocs"` // 0: the runtime's default (every CPU)
	LoadStart        float64  `json:"loadavg1_start"`
	LoadEnd          float64  `json:"loadavg1_end"`
	Seconds          float64  `json:"seconds"`
	Sockets          int      `json:"sockets"`
	ConnsHeld        int      `json:"conns_held"`
	ConnectFailed    int      `json:"connect_failed"`
	OfferedPerS      float64  `json:"offered_per_s"`
	DeliveredPerS    float64  `json:"delivered_per_s"`
	PublishedPerS    float64  `json:"published_per_s,omitempty"` // centrifugo: messages the API accepted
	Latency          summary  `json:"latency"`
	ServerCPUPct     float64  `json:"server_cpu_percent"`
	CPUPer1000       float64  `json:"server_cpu_ms_per_1000_deliveries"`
	BytesPerDelivery float64  `json:"bytes_per_delivery"`
	RSSEnd           int64    `json:"rss_end_bytes"`
	GenCPUPct        float64  `json:"generator_cpu_percent"`
	Dups             uint64   `json:"duplicates"`
	Gaps             uint64   `json:"gaps"`
	Disconnects      uint64   `json:"disconnects"`
	ErrorMsgs        uint64   `json:"error_messages"`
	PublishErrors    uint64   `json:"publish_errors"` // centrifugo: failed publishes; hub: failed run starts
	Errors           []string `json:"errors,omitempty"`
}

func (r *benchRow) pctOffered() float64 {
	if r.OfferedPerS <= 0 {
		return 0
	}
	return 100 * r.DeliveredPerS / r.OfferedPerS
}

func procsLabel(p int) string {
	if p <= 0 {
		return fmt.Sprintf("default (%d)", runtime.NumCPU())
	}
	return strconv.Itoa(p)
}

// hubRow takes a hub run's figures from its report.
func hubRow(rep *report, procs int) *benchRow {
	c := rep.Config
	r := &benchRow{Target: "hub", Procs: procs, LoadStart: rep.LoadStart[0], LoadEnd: rep.LoadEnd[0], Seconds: rep.Seconds,
		Sockets: rep.Sockets, ConnsHeld: rep.ConnsEnd, ConnectFailed: rep.ConnectFailed,
		DeliveredPerS: rep.LiveEventsPerS, Latency: rep.Latency, ServerCPUPct: rep.HubCPUPct, CPUPer1000: rep.HubCPUPerEvent,
		RSSEnd: rep.RSSEnd, GenCPUPct: rep.GenCPUPct, Dups: rep.Dups, Gaps: rep.Gaps, Disconnects: rep.Disconnects,
		ErrorMsgs: rep.ErrorMsgs, PublishErrors: rep.RunStartErrors, Errors: rep.Errors}
	if c.TokenMS > 0 {
		r.OfferedPerS = float64(c.Tabs) * 1000 / float64(c.TokenMS)
	}
	if rep.LiveEventsPerS > 0 {
		r.BytesPerDelivery = rep.BytesPerTabPerS * float64(c.Tabs) / rep.LiveEventsPerS
	}
	return r
}

// floorRow takes a floor run's figures (loadtest/floorhub, at the
// runtime's default GOMAXPROCS) from its report.
func floorRow(rep *report) *benchRow {
	r := hubRow(rep, 0)
	r.Target = "floor"
	return r
}

// write is a short report of one run.
func (r *benchRow) write(out io.Writer, extra string) {
	fmt.Fprintf(out, "\n%s (GOMAXPROCS %s): %d of %d sockets held (%d failed, %d dropped); delivered %.0f/s of %.0f offered (%.1f%%); "+
		"created→received p50 %.2f p99 %.2f max %.2f ms (n=%d); server CPU %.0f%%, %.1f ms per 1,000 deliveries; %.0f bytes per delivery; "+
		"generator CPU %.0f%%; duplicates %d, gaps %d; load %.2f → %.2f\n",
		r.Target, procsLabel(r.Procs), r.ConnsHeld, r.Sockets, r.ConnectFailed, r.Disconnects, r.DeliveredPerS, r.OfferedPerS, r.pctOffered(),
		r.Latency.P50, r.Latency.P99, r.Latency.Max, r.Latency.Count, r.ServerCPUPct, r.CPUPer1000, r.BytesPerDelivery,
		r.GenCPUPct, r.Dups, r.Gaps, r.LoadStart, r.LoadEnd)
	if extra != "" {
		fmt.Fprintln(out, extra)
	}
	for _, e := range r.Errors {
		fmt.Fprintln(out, "  error:", e)
	}
}

// errSkipped: no Centrifugo binary to compare with.
var errSkipped = errors.New("skipped")

// findCentrifugo is -centrifugo, else $CENTRIFUGO, else centrifugo on PATH,
// else where `go install` puts it ($GOBIN, $GOPATH/bin, ~/go/bin).
func findCentrifugo(flagPath string) (string, error) {
	for _, p := range []string{flagPath, os.Getenv("CENTRIFUGO")} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("centrifugo binary %q: not a file", p)
		}
		return p, nil
	}
	if p, err := exec.LookPath("centrifugo"); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		dirs = append(dirs, filepath.Join(strings.Split(d, string(os.PathListSeparator))[0], "bin"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "centrifugo")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errSkipped
}

// firstLineOf runs bin args and returns the first line it prints.
func firstLineOf(bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(firstLine(out)))
}

// centrifugoVersion is what the binary says of itself and, since a binary
// built with go install says v0.0.0, the module version it was built from.
func centrifugoVersion(bin string) string {
	v := firstLineOf(bin, "version")
	if bi, err := buildinfo.ReadFile(bin); err == nil && bi.Main.Path != "" {
		v += "; module " + bi.Main.Path + " " + bi.Main.Version
	}
	return v + " (" + bin + ")"
}

// hubVersion says which hub is measured: git describe of the module when
// the generator builds it, else what -hub-bin says of itself.
func hubVersion(given string) string {
	if given != "" {
		v := firstLineOf(given, "version")
		if bi, err := buildinfo.ReadFile(given); err == nil {
			for _, s := range bi.Settings {
				switch {
				case s.Key == "vcs.revision":
					v += "; commit " + s.Value
				case s.Key == "vcs.modified" && s.Value == "true":
					v += " (modified)"
				}
			}
		}
		if !strings.Contains(v, "commit") && strings.HasSuffix(v, " dev") {
			v += "; no commit recorded (make build stamps git describe)"
		}
		return v + " (-hub-bin " + given + ")"
	}
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "unknown"
	}
	d, err := exec.Command("git", "-C", filepath.Dir(strings.TrimSpace(string(mod))), "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	return strings.TrimSpace(string(d)) + " (built from the working tree)"
}

// fsType names the file system under dir (the journal's).
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	switch uint64(st.Type) {
	case 0x01021994:
		return "tmpfs: fsync costs nothing"
	case 0xEF53:
		return "ext4"
	case 0x794c7630:
		return "overlayfs"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	}
	return fmt.Sprintf("file system 0x%x", uint64(st.Type))
}

// parseProcs reads -hub-procs: a comma-separated list of GOMAXPROCS
// values, 0 for the runtime's default.
func parseProcs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > 256 {
			return nil, fmt.Errorf("-hub-procs %q: want GOMAXPROCS values 0..256 (0: default), comma-separated", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 || len(out) > 8 {
		return nil, fmt.Errorf("-hub-procs %q: want 1 to 8 values", s)
	}
	return out, nil
}

// compare runs the workload against Centrifugo, the floor (with
// -compare-floor) and the hub, alternating, cfg.Rounds times, and writes
// the markdown table to out. command is the
// command line, for the table's header.
func compare(ctx context.Context, cfg config, command string, out io.Writer) ([]*benchRow, error) {
	bin, err := findCentrifugo(cfg.CentrifugoBin)
	if err != nil {
		if errors.Is(err, errSkipped) {
			fmt.Fprintln(os.Stderr, "loadtest: -compare centrifugo SKIPPED: no Centrifugo binary (give -centrifugo PATH or CENTRIFUGO=PATH, "+
				"or put centrifugo on PATH: go install github.com/centrifugal/centrifugo/v6@v6.9.1)")
		}
		return nil, err
	}
	procs, err := parseProcs(cfg.HubProcs)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "runhub-loadtest-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	hv := hubVersion(cfg.HubBin)
	if cfg.HubBin, err = hubBinary(cfg.HubBin, dir, "./cmd/hub"); err != nil {
		return nil, err
	}
	floorBin := ""
	if cfg.CompareFloor {
		if floorBin, err = hubBinary(cfg.FloorBin, dir, "./loadtest/floorhub"); err != nil {
			return nil, err
		}
	}
	// The hub's runs must outlast connecting, their staggered starts, the
	// warmup and the measurement, as the channels' publishers do.
	if need := int((cfg.Warmup+cfg.Duration+time.Duration(float64(cfg.Runs)/cfg.RunRate*float64(time.Second))+30*time.Second)/time.Millisecond) / max(cfg.TokenMS, 1); cfg.Tokens < need {
		cfg.Tokens = need
	}
	dataDir := cfg.DataDir
	if dataDir == "" {
		dataDir = os.TempDir()
	}
	h := compareHeader{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Go: runtime.Version(),
		Hub: hv, Centrifugo: centrifugoVersion(bin),
		Fsync:   fmt.Sprintf("%s, journal under %s (%s)", fsyncPolicy(cfg.HubEnv), dataDir, fsType(dataDir)),
		Command: command, Cfg: cfg, Procs: procs}
	opts := cfOptions{Bin: bin, Procs: cfg.CFProcs, Publishers: cfg.CFPublishers, HistorySize: cfg.CFHistory, HistoryTTL: cfg.CFHistoryTTL}
	var rows []*benchRow
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...) }
	for round := 1; round <= cfg.Rounds; round++ {
		logf("round %d/%d: centrifugo (load %.2f)", round, cfg.Rounds, loadAvg()[0])
		row, err := runCentrifugo(ctx, cfg, opts, os.Stderr)
		if err != nil {
			return rows, fmt.Errorf("round %d, centrifugo: %w", round, err)
		}
		row.Round = round
		rows = append(rows, row)
		logf("round %d/%d: centrifugo done (load %.2f → %.2f)", round, cfg.Rounds, row.LoadStart, row.LoadEnd)
		if cfg.CompareFloor {
			logf("round %d/%d: floor (load %.2f)", round, cfg.Rounds, loadAvg()[0])
			rep, err := run(ctx, floorConfig(cfg, floorBin), os.Stderr)
			if err != nil {
				return rows, fmt.Errorf("round %d, floor: %w", round, err)
			}
			row := floorRow(rep)
			row.Round = round
			rows = append(rows, row)
			logf("round %d/%d: floor done (load %.2f → %.2f)", round, cfg.Rounds, row.LoadStart, row.LoadEnd)
		}
		for _, p := range procs {
			hc := cfg
			hc.JSONOut, hc.CPUProfile, hc.HeapProfile = "", "", ""
			hc.HubEnv = slices.Clone(cfg.HubEnv)
			if p > 0 {
				hc.HubEnv = append(hc.HubEnv, fmt.Sprintf("GOMAXPROCS=%d", p))
			}
			logf("round %d/%d: hub GOMAXPROCS %s (load %.2f)", round, cfg.Rounds, procsLabel(p), loadAvg()[0])
			rep, err := run(ctx, hc, os.Stderr)
			if err != nil {
				return rows, fmt.Errorf("round %d, hub GOMAXPROCS %s: %w", round, procsLabel(p), err)
			}
			row := hubRow(rep, p)
			row.Round = round
			rows = append(rows, row)
			logf("round %d/%d: hub GOMAXPROCS %s done (load %.2f → %.2f)", round, cfg.Rounds, procsLabel(p), row.LoadStart, row.LoadEnd)
		}
	}
	writeMarkdown(out, h, rows)
	if cfg.JSONOut != "" {
		b, err := json.MarshalIndent(map[string]any{"header": h, "rows": rows, "ratios": ratios(rows)}, "", "  ")
		if err != nil {
			return rows, err
		}
		b = append(b, '\n')
		if cfg.JSONOut == "-" {
			_, err = out.Write(b)
		} else {
			err = os.WriteFile(cfg.JSONOut, b, 0o644)
		}
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// floorConfig is the floor's run in a comparison, as -scenario centrifugo
// -floor runs it: bin (floorhub) with raw writes, no journal, none of the
// hub's environment (so GOMAXPROCS is the runtime's default), and no
// report files.
func floorConfig(cfg config, bin string) config {
	fc := cfg
	fc.Floor, fc.FloorWrite, fc.FloorJournal = true, "raw", false
	fc.HubBin, fc.HubEnv = bin, nil
	fc.JSONOut, fc.CPUProfile, fc.HeapProfile = "", "", ""
	return fc
}

// checkCompare refuses -compare with a workload the Centrifugo side cannot
// mirror: each socket follows one stream from its first message.
func (c *config) checkCompare() error {
	switch {
	case c.CompareFloor && c.Compare == "":
		return fmt.Errorf("-compare-floor needs -compare")
	case c.FloorBin != "" && !c.CompareFloor:
		return fmt.Errorf("-floor-bin needs -compare-floor")
	case c.CompareFloor && c.FloorWrite != "raw":
		return fmt.Errorf("-compare-floor measures the floor with -floor-write raw")
	}
	if c.Compare == "" {
		return nil
	}
	switch {
	case c.Compare != "centrifugo":
		return fmt.Errorf("-compare %q: unknown (known: centrifugo)", c.Compare)
	case !c.Spawn || c.SpawnRedis || c.Floor:
		return fmt.Errorf("-compare measures a spawned embedded hub: no -spawn-redis or -floor, and -spawn on")
	case c.Watch != 1 || c.FocusAll || c.Runs != c.Sessions || c.Runs < 1 || c.Tools != 0 || c.Replay != 0 || c.TokenMS < 1:
		return fmt.Errorf("-compare needs each tab to watch and focus one session with a run of its own: -watch 1, -runs = -sessions ≥ 1, -token-ms ≥ 1, no -focus-all, -tools or -replay")
	case c.Rounds < 1 || c.Rounds > 20:
		return fmt.Errorf("-rounds must be 1..20")
	case c.CFProcs < 0 || c.CFPublishers < 1 || c.CFPublishers > c.Runs || c.CFHistory < 0 || c.CFHistoryTTL < 0:
		return fmt.Errorf("-centrifugo-procs ≥ 0, -centrifugo-publishers 1..-runs, history size and ttl ≥ 0")
	}
	_, err := parseProcs(c.HubProcs)
	return err
}

// mainCompare runs -compare and returns the exit status: 0 (also when
// skipped for want of a Centrifugo binary), 1 on errors, 3 when any run saw
// a duplicate or a gap.
func mainCompare(cfg config) int {
	runs := compareRuns(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(runs)*(cfg.Warmup+cfg.Duration+3*time.Minute)+15*time.Minute)
	defer cancel()
	rows, err := compare(ctx, cfg, "go run ./loadtest "+strings.Join(os.Args[1:], " "), os.Stdout)
	if errors.Is(err, errSkipped) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 1
	}
	for _, r := range rows {
		if r.Dups > 0 || r.Gaps > 0 {
			return 3
		}
	}
	return 0
}

// compareRuns is the number of runs -compare makes: each round,
// Centrifugo, the floor with -compare-floor, and the hub at each -hub-procs.
func compareRuns(cfg config) int {
	per := 1 + strings.Count(cfg.HubProcs, ",") + 1
	if cfg.CompareFloor {
		per++
	}
	return cfg.Rounds * per
}

// fsyncPolicy describes the embedded journal's fsync policy the hub runs
// with: RUNHUB_JOURNAL_SYNC_EVERY in its environment, or the default.
func fsyncPolicy(env []string) string {
	every := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RUNHUB_JOURNAL_SYNC_EVERY="); ok {
			every = v
		}
	}
	if d, err := time.ParseDuration(every); err == nil && d > 0 {
		return fmt.Sprintf("event batches acknowledged once in the journal's files (surviving a crash of the process) and fdatasynced within %v (RUNHUB_JOURNAL_SYNC_EVERY=%s; run starts and ends, session changes: fdatasync on every commit)", d, every)
	}
	return "fsync on every journal commit (embedded bbolt journal, the default: RUNHUB_JOURNAL_SYNC_EVERY=0)"
}
