package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func row(target string, procs, round int, delivered, p50, p99, cpu float64) *benchRow {
	return &benchRow{Target: target, Procs: procs, Round: round, OfferedPerS: 50000, DeliveredPerS: delivered,
		Latency: summary{P50: p50, P99: p99, Max: 1.5 * p99}, CPUPer1000: cpu, Sockets: 1000, ConnsHeld: 1000}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Ratios are hub ÷ Centrifugo of the medians over the rounds, per hub
// GOMAXPROCS, each figure's median taken apart.
func TestRatios(t *testing.T) {
	rows := []*benchRow{
		row("centrifugo", 0, 1, 50000, 1, 10, 10), row("hub", 1, 1, 20000, 30, 300, 40), row("hub", 2, 1, 30000, 20, 100, 30),
		row("centrifugo", 0, 2, 40000, 3, 30, 14), row("hub", 1, 2, 25000, 10, 200, 20), row("hub", 2, 2, 35000, 20, 300, 36),
		row("centrifugo", 0, 3, 45000, 2, 20, 12), row("hub", 1, 3, 10000, 20, 100, 30), row("hub", 2, 3, 40000, 60, 200, 33),
	}
	rows[4].Latency.Max = 900 // hub@1's maxima 450, 900, 150: median 450
	rs := ratios(rows)
	if len(rs) != 2 || rs[0].Procs != 1 || rs[1].Procs != 2 || rs[0].Rounds != 3 {
		t.Fatalf("ratios %+v", rs)
	}
	// Centrifugo medians: 45000/s, 90%, p50 2, p99 20, max 30, CPU 12.
	// hub@1: 20000, p50 20, p99 200, CPU 30; hub@2: 35000, 20, 200, 33.
	for _, tc := range []struct {
		got, want float64
		what      string
	}{
		{rs[0].Delivered, 20000.0 / 45000, "delivered@1"}, {rs[0].PctOffered, 20000.0 / 45000, "%offered@1"},
		{rs[0].P50, 10, "p50@1"}, {rs[0].P99, 10, "p99@1"}, {rs[0].Max, 450.0 / 30, "max@1"}, {rs[0].CPUPer1000, 2.5, "cpu@1"},
		{rs[1].Delivered, 35000.0 / 45000, "delivered@2"}, {rs[1].P50, 10, "p50@2"}, {rs[1].CPUPer1000, 33.0 / 12, "cpu@2"},
	} {
		if !near(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	// No floor rows: no ratio to the floor.
	for _, r := range rs {
		if !math.IsNaN(r.CPUPerFloor) {
			t.Errorf("hub@%d CPU ÷ floor's without floor rows = %v, want NaN", r.Procs, r.CPUPerFloor)
		}
	}

	// With the floor in each round (its median CPU 8), the hub ÷ Centrifugo
	// ratios stay as they were and the hub's CPU is divided by the floor's.
	withFloor := append(slices.Clone(rows), row("floor", 0, 1, 50000, 1, 5, 6), row("floor", 0, 2, 50000, 1, 5, 8), row("floor", 0, 3, 49000, 2, 6, 13))
	fr := ratios(withFloor)
	if len(fr) != 2 || fr[0].Procs != 1 || fr[1].Procs != 2 || fr[0].Rounds != 3 || !near(fr[0].CPUPer1000, 2.5) || !near(fr[1].Delivered, 35000.0/45000) {
		t.Fatalf("floor rows changed the hub ÷ Centrifugo ratios: %+v", fr)
	}
	if !near(fr[0].CPUPerFloor, 30.0/8) || !near(fr[1].CPUPerFloor, 33.0/8) {
		t.Errorf("CPU ÷ floor's = %v, %v; want %v, %v", fr[0].CPUPerFloor, fr[1].CPUPerFloor, 30.0/8, 33.0/8)
	}
	// A floor whose median CPU is 0: NaN, and -1 in JSON.
	fr = ratios([]*benchRow{row("centrifugo", 0, 1, 100, 1, 2, 3), row("floor", 0, 1, 100, 1, 2, 0), row("hub", 1, 1, 100, 1, 2, 3)})
	if len(fr) != 1 || !math.IsNaN(fr[0].CPUPerFloor) || !near(fr[0].CPUPer1000, 1) {
		t.Errorf("zero floor CPU: %+v", fr)
	}
	if b, err := fr[0].MarshalJSON(); err != nil || !bytes.Contains(b, []byte(`"cpu_per_1000_vs_floor":-1`)) {
		t.Errorf("JSON of NaN CPU ÷ floor's: %s %v", b, err)
	}

	// An even count takes the mean of the middle two.
	m := medianRow([]*benchRow{row("hub", 1, 1, 10, 1, 1, 1), row("hub", 1, 2, 30, 3, 3, 3)})
	if m.DeliveredPerS != 20 || m.Latency.P50 != 2 || m.CPUPer1000 != 2 {
		t.Errorf("median of two: %+v", m)
	}
	// Nothing to divide by: no ratio rather than a wrong one.
	rs = ratios([]*benchRow{row("centrifugo", 0, 1, 0, 0, 0, 0), row("hub", 0, 1, 100, 1, 2, 3)})
	if len(rs) != 1 || !math.IsNaN(rs[0].Delivered) || !math.IsNaN(rs[0].CPUPer1000) || fmtRatio(rs[0].P99) != "–" {
		t.Errorf("zero Centrifugo: %+v", rs)
	}
	if rs := ratios([]*benchRow{row("hub", 1, 1, 100, 1, 2, 3)}); len(rs) != 1 || !math.IsNaN(rs[0].P50) {
		t.Errorf("no Centrifugo rows: %+v", rs)
	}
	if b, err := rs[0].MarshalJSON(); err != nil || !bytes.Contains(b, []byte(`"p50":-1`)) {
		t.Errorf("JSON of NaN ratio: %s %v", b, err)
	}
}

// The floor's run: floorhub as -floor spawns it, with none of the hub's
// environment or report files.
func TestFloorConfig(t *testing.T) {
	cfg, err := parseFlags([]string{"-compare", "centrifugo", "-compare-floor", "-hub-env", "RUNHUB_JOURNAL_SYNC_EVERY=100ms",
		"-hub-bin", "/bin/hub", "-json", "out.json", "-cpuprofile", "cpu.pprof", "-heapprofile", "heap.pprof", "-data", "/dev/shm"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.HubEnv = append(cfg.HubEnv, "GOMAXPROCS=2")
	cfg.FloorWrite, cfg.FloorJournal = "lib", true // not the comparison's floor, whatever the config says
	fc := floorConfig(cfg, "/tmp/floorhub")
	if !fc.Floor || fc.FloorWrite != "raw" || fc.FloorJournal || fc.HubBin != "/tmp/floorhub" || fc.HubEnv != nil ||
		fc.JSONOut != "" || fc.CPUProfile != "" || fc.HeapProfile != "" {
		t.Errorf("floor config %+v", fc)
	}
	if fc.Tabs != cfg.Tabs || fc.Runs != cfg.Runs || fc.TokenMS != cfg.TokenMS || fc.Tokens != cfg.Tokens || fc.DataDir != "/dev/shm" || fc.Duration != cfg.Duration {
		t.Errorf("the floor's workload differs from the comparison's: %+v", fc)
	}
	if cfg.Floor || cfg.HubBin != "/bin/hub" || len(cfg.HubEnv) != 2 || cfg.JSONOut != "out.json" {
		t.Errorf("floorConfig changed the comparison's config: %+v", cfg)
	}
}

func TestCompareRuns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-compare", "centrifugo"}, 2},
		{[]string{"-compare", "centrifugo", "-rounds", "3", "-hub-procs", "1,2"}, 9},
		{[]string{"-compare", "centrifugo", "-rounds", "3", "-hub-procs", "1,2", "-compare-floor"}, 12},
	} {
		cfg, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := compareRuns(cfg); got != tc.want {
			t.Errorf("%v: %d runs, want %d", tc.args, got, tc.want)
		}
	}
}

// groups keeps the floor's rows apart from the hub's and Centrifugo's.
func TestGroupsFloor(t *testing.T) {
	rows := []*benchRow{
		row("centrifugo", 0, 1, 1, 1, 1, 1), row("floor", 0, 1, 1, 1, 1, 1), row("hub", 1, 1, 1, 1, 1, 1), row("hub", 0, 1, 1, 1, 1, 1),
		row("centrifugo", 0, 2, 1, 1, 1, 1), row("floor", 0, 2, 1, 1, 1, 1), row("hub", 1, 2, 1, 1, 1, 1), row("hub", 0, 2, 1, 1, 1, 1),
	}
	cf, hubs, floor := groups(rows)
	if len(cf) != 2 || cf[0] != rows[0] || cf[1] != rows[4] {
		t.Errorf("centrifugo rows %v", cf)
	}
	if len(floor) != 2 || floor[0] != rows[1] || floor[1] != rows[5] {
		t.Errorf("floor rows %v", floor)
	}
	if len(hubs) != 2 || len(hubs[0]) != 2 || len(hubs[1]) != 2 || hubs[0][0] != rows[2] || hubs[0][1] != rows[6] || hubs[1][0] != rows[3] || hubs[1][1] != rows[7] {
		t.Errorf("hub rows %v", hubs)
	}
	for _, g := range hubs {
		for _, r := range g {
			if r.Target != "hub" {
				t.Errorf("a %s row among the hub's", r.Target)
			}
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	cfg, err := parseFlags([]string{"-compare", "centrifugo", "-rounds", "2", "-hub-procs", "1,2"})
	if err != nil {
		t.Fatal(err)
	}
	h := compareHeader{Date: "2026-12-02T10:00:00Z", CPUs: 2, Go: "go1.26.8", Hub: "v0.9-3-gabc (built from the working tree)",
		Centrifugo: "Centrifugo v6.9.1", Fsync: "fsync on every journal commit", Command: "go run ./loadtest -compare centrifugo", Cfg: cfg, Procs: []int{1, 2}}
	rows := []*benchRow{row("centrifugo", 0, 1, 49812.4, 1.23, 4.56, 14), row("hub", 1, 1, 30000, 20, 60, 28), row("hub", 2, 1, 40000, 10, 40, 21)}
	rows[0].LoadStart, rows[0].LoadEnd = 3.1, 4.25
	rows[0].PublishedPerS = 9990
	var b bytes.Buffer
	writeMarkdown(&b, h, rows)
	out := b.String()
	if strings.Contains(out, "not reached") {
		t.Errorf("9,990 of 10,000 messages/s published called short:\n%s", out)
	}
	for _, want := range []string{
		"go run ./loadtest -compare centrifugo",
		"1,000 sockets, 200 streams × 50 messages/s, 5 sockets per stream: **50,000 deliveries/s offered**",
		"Centrifugo, hub GOMAXPROCS 1, hub GOMAXPROCS 2",
		"v0.9-3-gabc", "fsync on every journal commit", "Centrifugo v6.9.1",
		"| 1 | Centrifugo | default (", "| 3.10 → 4.25 | 49,812 | 99.6% | 1.2 | 4.6 |",
		"| 1 | hub | 1 |", "| 1 | hub | 2 |",
		"| 1 | 0.60× | 0.60× | 16.26× | 13.16× | 13.16× | 2.00× | – |",
		"| 2 | 0.80× |",
		"| max | CPU per 1,000 deliveries | CPU ÷ floor's |\n|---|---|---|---|---|---|---|---|\n",
		"no duplicate and no gap, on both servers;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"- Floor:", "| floor |", "Centrifugo, floor", "every server", "floor's, from"} {
		if strings.Contains(out, not) {
			t.Errorf("markdown without floor rows has %q:\n%s", not, out)
		}
	}
	if n := strings.Count(out, "\n| 1 | "); n != 4 { // three runs of round 1, and hub@1's ratio row
		t.Errorf("%d lines starting with round 1:\n%s", n, out)
	}

	// The floor as a third server (-compare-floor), after Centrifugo.
	fl := row("floor", 0, 1, 49000, 0.5, 2, 7)
	fl.LoadStart, fl.LoadEnd = 4.25, 4.5
	withFloor := []*benchRow{rows[0], fl, rows[1], rows[2]}
	b.Reset()
	writeMarkdown(&b, h, withFloor)
	fout := b.String()
	for _, want := range []string{
		"each in the order Centrifugo, floor, hub GOMAXPROCS 1, hub GOMAXPROCS 2.",
		"- Floor: loadtest/floorhub, which encodes each event once and writes it to each focusing socket with one write system call: " +
			"no journal, no queue, no statuses; what one write per delivery costs on this machine in this window.\n",
		"| 1 | floor | default (", "| 4.25 → 4.50 | 49,000 | 98.0% | 0.5 | 2.0 |",
		"| floor | default (", ") | 1 | 49,000 | 98.0% | 0.5 | 2.0 | 3.0 | 0% | 7.0 |",
		"| 1 | 0.60× | 0.60× | 16.26× | 13.16× | 13.16× | 2.00× | 4.00× |",
		"| 2 | 0.80× | 0.80× | 8.13× | 8.77× | 8.77× | 1.50× | 3.00× |",
		"no duplicate and no gap, on every server;",
	} {
		if !strings.Contains(fout, want) {
			t.Errorf("markdown with the floor lacks %q:\n%s", want, fout)
		}
	}
	if strings.Contains(fout, "both servers") {
		t.Errorf("three servers called both:\n%s", fout)
	}
	if n := strings.Count(fout, "\n| 1 | "); n != 5 { // four runs of round 1, and hub@1's ratio row
		t.Errorf("%d lines starting with round 1:\n%s", n, fout)
	}
	if i, j := strings.Index(fout, "| 1 | Centrifugo |"), strings.Index(fout, "| 1 | floor |"); i < 0 || j < i || strings.Index(fout, "| 1 | hub | 1 |") < j {
		t.Errorf("runs not in the order Centrifugo, floor, hub:\n%s", fout)
	}
	if i, j := strings.Index(fout, "\n| Centrifugo | "), strings.Index(fout, "\n| floor | "); i < 0 || j < i || strings.Index(fout, "\n| hub | 1 | ") < j {
		t.Errorf("medians not in the order Centrifugo, floor, hub:\n%s", fout)
	}
	rows[0].PublishedPerS = 2670
	rows[2].Gaps = 3
	rows[2].Errors = []string{"tab 4: 0 duplicates, 3 gaps"}
	b.Reset()
	writeMarkdown(&b, h, rows)
	if !strings.Contains(b.String(), "Problems:") || !strings.Contains(b.String(), "round 1 hub GOMAXPROCS 2: 0 duplicates, 3 gaps") {
		t.Errorf("a gap is not reported:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "Round 1: Centrifugo accepted 2,670 of the 10,000 messages/s") {
		t.Errorf("publishers falling short are not reported:\n%s", b.String())
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 49812.6: "49,813", 1234567: "1,234,567", -2500: "-2,500"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestHubRow(t *testing.T) {
	rep := &report{Config: config{Tabs: 1000, TokenMS: 20}, LoadStart: [3]float64{2, 1, 1}, LoadEnd: [3]float64{3, 1, 1},
		Sockets: 1000, ConnsEnd: 999, LiveEventsPerS: 40000, BytesPerTabPerS: 12000, HubCPUPct: 90, HubCPUPerEvent: 22.5,
		Latency: summary{P50: 5, P99: 50}, Gaps: 2}
	r := hubRow(rep, 2)
	if r.Target != "hub" || r.Procs != 2 || r.OfferedPerS != 50000 || r.pctOffered() != 80 || r.CPUPer1000 != 22.5 ||
		r.BytesPerDelivery != 300 || r.LoadStart != 2 || r.LoadEnd != 3 || r.ConnsHeld != 999 || r.Gaps != 2 || r.Latency.P99 != 50 {
		t.Errorf("hub row %+v", r)
	}
	// The floor's row: the same figures, its own target, the default GOMAXPROCS.
	f := floorRow(rep)
	if f.Target != "floor" || f.Procs != 0 || f.CPUPer1000 != 22.5 || f.pctOffered() != 80 || f.BytesPerDelivery != 300 || f.Gaps != 2 || serverLabel(f) != "floor" {
		t.Errorf("floor row %+v", f)
	}
}

func TestParseFlagsCompare(t *testing.T) {
	cfg, err := parseFlags([]string{"-compare", "centrifugo", "-duration", "5s", "-hub-procs", "1, 2"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Scenario != "centrifugo" || !cfg.Spawn || cfg.Tabs != 1000 || cfg.Runs != 200 || cfg.Watch != 1 || cfg.Duration != 5*time.Second || cfg.Rounds != 1 {
		t.Errorf("compare did not take the centrifugo scenario: %+v", cfg)
	}
	if p, err := parseProcs(cfg.HubProcs); err != nil || len(p) != 2 || p[0] != 1 || p[1] != 2 {
		t.Errorf("hub procs %v %v", p, err)
	}
	if cfg.CompareFloor || cfg.FloorBin != "" {
		t.Errorf("the floor without -compare-floor: %v %q", cfg.CompareFloor, cfg.FloorBin)
	}
	cfg, err = parseFlags([]string{"-compare", "centrifugo", "-compare-floor", "-floor-bin", "/bin/floorhub"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.CompareFloor || cfg.FloorBin != "/bin/floorhub" || cfg.Floor {
		t.Errorf("-compare-floor -floor-bin: %v %q floor %v", cfg.CompareFloor, cfg.FloorBin, cfg.Floor)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-compare-floor"}, "-compare-floor needs -compare"},
		{[]string{"-compare", "centrifugo", "-floor-bin", "x"}, "-floor-bin needs -compare-floor"},
	} {
		if _, err := parseFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"-compare", "nats"},
		{"-compare", "centrifugo", "-watch", "2", "-sessions", "200"},
		{"-compare", "centrifugo", "-sessions", "400"},
		{"-compare", "centrifugo", "-spawn-redis", "-spawn=false"},
		{"-compare", "centrifugo", "-floor"},
		{"-compare", "centrifugo", "-rounds", "0"},
		{"-compare", "centrifugo", "-hub-procs", "1,x"},
		{"-compare", "centrifugo", "-hub-procs", ","},
		{"-compare", "centrifugo", "-centrifugo-publishers", "0"},
		{"-compare", "centrifugo", "-centrifugo-publishers", "201"},
		{"-compare-floor"},
		{"-scenario", "centrifugo", "-compare-floor"},
		{"-compare", "centrifugo", "-floor-bin", "/bin/floorhub"},
		{"-scenario", "centrifugo", "-floor", "-floor-bin", "/bin/floorhub"},
		{"-compare", "centrifugo", "-compare-floor", "-floor-write", "lib"},
		{"-compare", "centrifugo", "-compare-floor", "-floor"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestFindCentrifugo(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "centrifugo")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	t.Setenv("HOME", home)
	t.Setenv("GOPATH", "")
	t.Setenv("GOBIN", "")
	t.Setenv("CENTRIFUGO", "")
	if _, err := findCentrifugo(""); !errors.Is(err, errSkipped) {
		t.Errorf("nothing anywhere: %v, want skipped", err)
	}
	if _, err := findCentrifugo(filepath.Join(dir, "nope")); err == nil || errors.Is(err, errSkipped) {
		t.Errorf("a missing -centrifugo must be an error, not a skip: %v", err)
	}
	t.Setenv("CENTRIFUGO", bin)
	if p, err := findCentrifugo(""); err != nil || p != bin {
		t.Errorf("$CENTRIFUGO: %q %v", p, err)
	}
	t.Setenv("CENTRIFUGO", "")
	t.Setenv("PATH", dir)
	if p, err := findCentrifugo(""); err != nil || p != bin {
		t.Errorf("PATH: %q %v", p, err)
	}
	t.Setenv("PATH", t.TempDir())
	if err := os.MkdirAll(filepath.Join(home, "go", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	inHome := filepath.Join(home, "go", "bin", "centrifugo")
	if err := os.WriteFile(inHome, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := findCentrifugo(""); err != nil || p != inHome {
		t.Errorf("~/go/bin: %q %v", p, err)
	}
}

// The comparison names the fsync policy the hub ran with.
func TestFsyncPolicy(t *testing.T) {
	if got := fsyncPolicy(nil); !strings.Contains(got, "fsync on every journal commit") {
		t.Errorf("default: %q", got)
	}
	if got := fsyncPolicy([]string{"GOMAXPROCS=2", "RUNHUB_JOURNAL_SYNC_EVERY=100ms"}); !strings.Contains(got, "fdatasynced within 100ms") {
		t.Errorf("sync every 100ms: %q", got)
	}
	if got := fsyncPolicy([]string{"RUNHUB_JOURNAL_SYNC_EVERY=0"}); !strings.Contains(got, "fsync on every journal commit") {
		t.Errorf("sync every 0: %q", got)
	}
}
