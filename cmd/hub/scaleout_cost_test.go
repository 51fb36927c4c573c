package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// TestScaleOut_MeasureRedisCost measures what the scaled fan-out costs
// Redis (docs/benchmarks.md, "Scale-out (Redis, 2 replicas)"). It is a
// measurement, not a pass/fail test: it runs only with
// RUNHUB_MEASURE_SCALEOUT=1 and logs a table.
//
// Each row runs R sim runs of K tokens at once in two runners while T tabs
// focus them, spread over two hub replicas: with T = R each run has one tab
// (runs split between the replicas), with T = 2R one tab on each replica,
// with T = 4R two on each. Tabs focus before the runs start. Redis's CPU
// (INFO cpu) and per-command time (INFO commandstats) are read before and
// after; the row with T = 0 is the cost of executing and journaling the
// same runs with nobody focused, so a row's cost above it is the
// fan-out's. Connections per process (CLIENT LIST, by client name) are
// sampled while the runs stream: all of them, and those blocked in a read.
func TestScaleOut_MeasureRedisCost(t *testing.T) {
	if os.Getenv("RUNHUB_MEASURE_SCALEOUT") == "" {
		t.Skip("a measurement: set RUNHUB_MEASURE_SCALEOUT=1 to run it")
	}
	reps := 3
	if n, err := strconv.Atoi(os.Getenv("RUNHUB_MEASURE_REPS")); err == nil && n > 0 {
		reps = n
	}
	const k = 1000
	script := fmt.Sprintf(`{"tokens":%d,"token_ms":5,"tools":0}`, k)
	s := newScaled(t, redistest.Options{}, 10*time.Second)
	hubs := []*hubProcess{s.hub("hubA"), s.hub("hubB")}
	s.runner("r1")
	s.runner("r2")

	type config struct{ r, tabsPerRun int }
	var configs []config
	for _, r := range []int{1, 10, 50} {
		for _, tp := range []int{0, 1, 2, 4} {
			configs = append(configs, config{r, tp})
		}
	}
	// Every repetition measures every row, the row with no tab just before
	// the others of its R: each fan-out figure is computed against the
	// baseline of its own repetition.
	type derived struct{ jrnl, cpuDlv, cpuTail, xDlv, xTail, xCallsTail float64 }
	results := map[config][]derived{}
	last := map[config]costRow{}
	conns, blocked := map[config]map[string]int{}, map[config]map[string]int{}
	for rep := range reps {
		base := map[int]costRow{}
		for _, c := range configs {
			rw := measureRow(t, s, hubs, script, c.r, c.r*c.tabsPerRun)
			if c.tabsPerRun == 0 {
				base[c.r] = rw
			}
			b := base[c.r]
			// This row's cost above the same runs with no tab, scaled to the
			// events journaled (runs differ by a few events).
			scale := float64(rw.journaled) / float64(max(b.journaled, 1))
			fanCPU := rw.cpuUS - b.cpuUS*scale
			fanX := float64(rw.cmd["xread"].usec) - float64(b.cmd["xread"].usec)*scale
			fanCalls := float64(rw.cmd["xread"].calls) - float64(b.cmd["xread"].calls)*scale
			d := derived{jrnl: rw.cpuUS / float64(rw.journaled)}
			if rw.delivered > 0 {
				d.cpuDlv, d.cpuTail = fanCPU/float64(rw.delivered), fanCPU/float64(rw.tailed)
				d.xDlv, d.xTail = fanX/float64(rw.delivered), fanX/float64(rw.tailed)
				d.xCallsTail = fanCalls / float64(rw.tailed)
			}
			results[c] = append(results[c], d)
			last[c] = rw
			if conns[c] == nil {
				conns[c], blocked[c] = map[string]int{}, map[string]int{}
			}
			for name, n := range rw.conns {
				conns[c][name] = max(conns[c][name], n)
				blocked[c][name] = max(blocked[c][name], rw.blocked[name])
			}
			t.Logf("rep %d R=%d T=%d: redis %.0f µs for %d events journaled, %d delivered", rep+1, rw.r, rw.t, rw.cpuUS, rw.journaled, rw.delivered)
		}
	}
	// median (min–max) of one derived figure over the repetitions
	stat := func(ds []derived, f func(derived) float64) string {
		v := make([]float64, len(ds))
		for i, d := range ds {
			v[i] = f(d)
		}
		slices.Sort(v)
		return fmt.Sprintf("%.1f (%.1f–%.1f)", v[len(v)/2], v[0], v[len(v)-1])
	}
	t.Logf("K=%d tokens per run, one every 5 ms; %d repetitions; figures are median (min–max) µs of Redis time", k, reps)
	t.Logf("| R | T | journaled | delivered | tailed | Redis CPU per journaled event | fan-out CPU per delivered event | per tailed event | XREAD time per delivered event | per tailed event | XREAD calls per tailed event | connections per process, max (blocked in a read) |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range configs {
		rw, ds := last[c], results[c]
		var cs []string
		for name, n := range conns[c] {
			cs = append(cs, fmt.Sprintf("%s %d (%d)", name, n, blocked[c][name]))
		}
		slices.Sort(cs)
		fan := func(f func(derived) float64) string {
			if c.tabsPerRun == 0 {
				return "–"
			}
			return stat(ds, f)
		}
		t.Logf("| %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |", rw.r, rw.t, rw.journaled, rw.delivered, rw.tailed,
			stat(ds, func(d derived) float64 { return d.jrnl }),
			fan(func(d derived) float64 { return d.cpuDlv }), fan(func(d derived) float64 { return d.cpuTail }),
			fan(func(d derived) float64 { return d.xDlv }), fan(func(d derived) float64 { return d.xTail }),
			fan(func(d derived) float64 { return d.xCallsTail }), strings.Join(cs, ", "))
	}
	for _, c := range configs {
		rw := last[c]
		var names []string
		for name, st := range rw.cmd {
			if st.usec*100 >= int64(rw.cpuUS) { // the commands over 1% of the CPU
				names = append(names, fmt.Sprintf("%s=%d/%dµs", name, st.calls, st.usec))
			}
		}
		slices.Sort(names)
		t.Logf("last rep R=%d T=%d commands over 1%% of Redis CPU (calls/µs): %s", rw.r, rw.t, strings.Join(names, " "))
	}
}

// costRow is one row of TestScaleOut_MeasureRedisCost.
type costRow struct {
	r, t                 int
	journaled, delivered int
	tailed               int     // Σ over replicas of the events of the runs it tails
	cpuUS                float64 // Redis user+sys CPU
	cmd                  map[string]cmdStat
	conns, blocked       map[string]int // max per client name while streaming
}

// measureRow measures nRuns runs of script with nTabs tabs focusing them.
func measureRow(t *testing.T, s *scaled, hubs []*hubProcess, script string, nRuns, nTabs int) costRow {
	ctx := context.Background()
	rw := costRow{r: nRuns, t: nTabs, conns: map[string]int{}, blocked: map[string]int{}}
	// Sessions first, so the tabs focus them before their runs start.
	sids := make([]string, nRuns)
	for i := range sids {
		var sess protocol.CreateSessionResult
		if code := call(t, "POST", hubs[i%2].URL()+"/v1/sessions", map[string]string{"title": "m"}, &sess); code != 201 {
			t.Fatalf("create session: %d", code)
		}
		sids[i] = sess.SessionID
	}
	focusedOn := make([]map[int]bool, nRuns) // run → the replicas tailing it
	for i := range focusedOn {
		focusedOn[i] = map[int]bool{}
	}
	type result struct {
		n   int
		err error
	}
	results := make(chan result, nTabs)
	var tabs []*client.Conn
	for i := range nTabs {
		run, replica := i%nRuns, (i/nRuns+i%nRuns)%2
		focusedOn[run][replica] = true
		c, err := client.Dial(ctx, "ws://"+hubs[replica].addr+"/v1/ws", client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tabs = append(tabs, c)
		if err := c.Focus(ctx, sids[run], ""); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, c := range tabs {
			c.Close()
		}
	}()
	for _, c := range tabs {
		ping(t, c) // the focus is in force
	}
	s.rdb.ConfigResetStat(ctx)
	cpu0 := redisCPU(t, s.rdb)
	for _, c := range tabs {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 120*time.Second)
			defer cancel()
			n := 0
			for {
				m, err := c.Next(rctx)
				if err != nil {
					results <- result{n, err}
					return
				}
				if em, ok := m.(*protocol.EventMessage); ok {
					n++
					if em.Event.Terminal {
						results <- result{n, nil}
						return
					}
				}
			}
		}()
	}
	runs := make([]string, nRuns)
	for i, sid := range sids {
		var run protocol.RunStartResult
		body := map[string]any{"message": "measure", "metadata": map[string]any{"sim": jsonRaw(script)}}
		if code := call(t, "POST", hubs[i%2].URL()+"/v1/sessions/"+sid+"/runs", body, &run); code != 202 {
			t.Fatalf("start: %d", code)
		}
		runs[i] = run.RunID
	}
	metas := map[string]string{} // run id → its meta hash's key
	for _, id := range runs {
		metas[id] = s.runKey(id, "")
	}
	// Sample connections while the runs stream, until every run ended
	// (read straight from the run hashes: cheap, unlike a fold).
	deadline := time.Now().Add(120 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("runs did not end")
		}
		all, blocked := clientsByName(t, s.rdb)
		for name, n := range all {
			rw.conns[name] = max(rw.conns[name], n)
			rw.blocked[name] = max(rw.blocked[name], blocked[name])
		}
		cmds, _ := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, id := range runs {
				p.HGet(ctx, metas[id], "terminal")
			}
			return nil
		})
		ended := 0
		for _, c := range cmds {
			if v, _ := c.(*goredis.StringCmd).Result(); v == "1" {
				ended++
			}
		}
		if ended == nRuns {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range nTabs {
		res := <-results
		if res.err != nil {
			t.Fatalf("tab: %v", res.err)
		}
		rw.delivered += res.n
	}
	rw.cpuUS = redisCPU(t, s.rdb) - cpu0
	rw.cmd = commandStats(t, s.rdb)
	for i, id := range runs {
		n, err := s.rdb.HGet(ctx, metas[id], "last_seq").Int()
		if err != nil {
			t.Fatal(err)
		}
		rw.journaled += n
		rw.tailed += n * len(focusedOn[i])
	}
	return rw
}

type cmdStat struct{ calls, usec int64 }

// redisCPU is Redis's used_cpu_sys + used_cpu_user in µs.
func redisCPU(t testing.TB, rdb goredis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f * 1e6
		}
	}
	return total
}

// commandStats reads INFO commandstats: calls and µs per command.
func commandStats(t testing.TB, rdb goredis.UniversalClient) map[string]cmdStat {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// clientsByName counts Redis connections per client name, all and those
// blocked in a read (the test's own excluded).
func clientsByName(t testing.TB, rdb goredis.UniversalClient) (all, blocked map[string]int) {
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	all, blocked = map[string]int{}, map[string]int{}
	for _, line := range strings.Split(list, "\n") {
		var name string
		isBlocked := false
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "name="); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(v, "b") {
				isBlocked = true
			}
		}
		if name == "" || name == "test" {
			continue
		}
		all[name]++
		if isBlocked {
			blocked[name]++
		}
	}
	return all, blocked
}

// ping waits until the hub has handled everything c sent before it.
func ping(t testing.TB, c *client.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "sync"}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for pong: %v", err)
		}
		if p, ok := m.(*protocol.Pong); ok && p.ID == "sync" {
			return
		}
	}
}
