//go:build fault

package main

// The fault suite (make fault; docs/security.md "Fault tests"): hub
// processes under stalled tabs, junk, socket churn, Redis outages and a
// full or read-only data directory. Each test says what it proves; the
// figures they log (RSS, goroutines) are quoted in docs/security.md.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// fastDir is a data directory for tests about delivery rather than
// durability: on /dev/shm (a tmpfs: fsync costs nothing, so a long run
// takes seconds, not a minute under the race detector) when there is one.
func fastDir(t *testing.T) string {
	t.Helper()
	if d, err := os.MkdirTemp("/dev/shm", "runhub-fault"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

// memory is a process's resident memory from /proc/<pid>/status, in bytes.
type memory struct{ rss, anon int64 }

func procMemory(t testing.TB, pid int) memory {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		}
	}
	return m
}

func (m memory) String() string {
	return fmt.Sprintf("RSS %.1f MiB (anonymous %.1f MiB)", float64(m.rss)/(1<<20), float64(m.anon)/(1<<20))
}

// hubMetric scrapes one series of the hub's /metrics (-1 when absent).
func hubMetric(t testing.TB, p *hubProcess, series string) float64 {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return seriesValue(string(b), series)
}

// endsWith reports whether the last event b received is runID's terminal
// one (tab.terminal copies every event of the run: quadratic over a long
// run).
func endsWith(b *tab, runID string) bool {
	n := len(b.events)
	return n > 0 && b.events[n-1].RunID == runID && b.events[n-1].Terminal
}

// raceEnabled is set when the suite runs under the race detector (its own
// memory is in the hub's RSS and grows with every goroutine it has seen).
var raceEnabled bool

// liveHeap is the hub's heap right after a collection (the hub serves
// pprof: RUNHUB_PPROF=1).
func liveHeap(t testing.TB, p *hubProcess) float64 {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(p.URL() + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatalf("GET /debug/pprof/heap: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /debug/pprof/heap: %d (start the hub with RUNHUB_PPROF=1)", resp.StatusCode)
	}
	return hubMetric(t, p, "go_memstats_heap_alloc_bytes")
}

// bounded fails the test if the hub kept what a fault brought: its live
// heap more than 16 MiB over what it was, or (without the race detector,
// whose own memory grows with every goroutine it has seen) its anonymous
// resident memory more than 64 MiB over.
func bounded(t *testing.T, what string, heapBefore, heapAfter float64, before, after memory) {
	t.Helper()
	if heapAfter-heapBefore > 16<<20 {
		t.Fatalf("after %s the hub's live heap is %.1f MiB, %.1f MiB before", what, heapAfter/(1<<20), heapBefore/(1<<20))
	}
	if grew := after.anon - before.anon; grew > 64<<20 && !raceEnabled {
		t.Fatalf("after %s the hub's anonymous memory grew by %.1f MiB", what, float64(grew)/(1<<20))
	}
}

// healthy fails the test unless the hub process is running and /healthz
// answers 200 within within; it returns how long the answer took.
func healthy(t testing.TB, p *hubProcess, within time.Duration) time.Duration {
	t.Helper()
	if p.exited() {
		t.Fatalf("the hub exited: %v\n%s", p.waitErr, tail(p.out.String(), 4000))
	}
	c := http.Client{Timeout: within}
	start := time.Now()
	resp, err := c.Get(p.URL() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	return time.Since(start)
}

// noPanic fails the test if the hub's output shows a panic or a data race.
func noPanic(t testing.TB, p *hubProcess) {
	t.Helper()
	out := p.out.String()
	for _, bad := range []string{"panic:", "DATA RACE", "fatal error:"} {
		if strings.Contains(out, bad) {
			t.Fatalf("the hub's output has %q:\n%s", bad, tail(out, 8000))
		}
	}
}

// normalRun proves a hub still works: a fresh tab starts a sim run,
// focuses it and receives every event, in order, once.
func normalRun(t *testing.T, p *hubProcess) {
	t.Helper()
	ta := dialTab(t, p)
	res := ta.start(`{"tokens":50,"token_ms":1,"tools":1}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(30*time.Second, "the run's terminal event", func() bool { return ta.terminal(res.RunID) })
	checkDone(t, "a normal run", ta.run(res.RunID), 50)
	sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), allEvents(t, p.URL(), res.RunID))
	ta.c.Close()
}

// settle waits until the hub has at most sockets open and its goroutines
// are back within slack of base; it returns the goroutine count.
func settle(t *testing.T, p *hubProcess, sockets int, base, slack float64) float64 {
	t.Helper()
	var g float64
	waitFor(t, 30*time.Second, fmt.Sprintf("%d sockets open and goroutines within %v of %v", sockets, slack, base), func() bool {
		g = hubMetric(t, p, "go_goroutines")
		return hubMetric(t, p, "runhub_sockets_open") <= float64(sockets) && g <= base+slack
	})
	return g
}

// runThenStream is the start of the journal fault tests: a short run
// journaled to its end (checked), then a long run (script) that a tab
// focuses.
func runThenStream(t *testing.T, p *hubProcess, script string) (protocol.RunStartResult, []protocol.Envelope, *tab, protocol.ControlResult) {
	t.Helper()
	before := startHTTP(t, p, `{"tokens":20,"token_ms":0,"tools":1}`)
	beforeEvents := waitTerminal(t, p, before.RunID, 30*time.Second)
	checkDone(t, "the run before the fault", beforeEvents, 20)
	ta := dialTab(t, p)
	big := ta.start(script)
	ta.c.Focus(ta.ctx(), big.SessionID, "")
	return before, beforeEvents, ta, big
}
