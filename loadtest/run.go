package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/runhub/runhub/internal/ctxsleep"
)

// run does one load test and writes its report to out.
func run(ctx context.Context, cfg config, out io.Writer) (*report, error) {
	g := &gen{cfg: cfg, hc: newHTTPClient(), errs: map[string]int{}}
	raiseNoFile(uint64(cfg.sockets())*2 + 1024)
	if have := noFile(); have < uint64(cfg.sockets())+256 {
		return nil, fmt.Errorf("open-file limit %d is too low for %d sockets: raise it (ulimit -n %d)", have, cfg.sockets(), cfg.sockets()*2+1024)
	}
	rep := &report{Config: cfg, Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	rep.LoadStart = loadAvg()

	// The hub(s) under test.
	var cl *cluster
	if cfg.Spawn || cfg.SpawnRedis {
		dir, err := os.MkdirTemp("", "runhub-loadtest-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		pkg, env, dataEnv := "./cmd/hub", cfg.HubEnv, ""
		if cfg.Floor {
			pkg, env = "./loadtest/floorhub", append([]string{"FLOORHUB_WRITE=" + cfg.FloorWrite}, env...)
			if cfg.FloorJournal {
				dataEnv = "FLOORHUB_JOURNAL" // where the hub's journal would go
			}
		}
		bin, err := hubBinary(cfg.HubBin, dir, pkg)
		if err != nil {
			return nil, err
		}
		if cfg.Spawn {
			cl, err = spawnEmbedded(bin, cfg.DataDir, env, dataEnv)
		} else {
			cl, err = spawnRedis(bin, cfg.Hubs, max(2*cfg.Runs, 100), cfg.HubEnv, cfg.RedisCluster)
		}
		if err != nil {
			return nil, err
		}
		defer cl.stop()
		for _, h := range cl.hubs {
			g.targets = append(g.targets, h.addr)
		}
		g.pids = cl.pids()
		g.pprofBase = "http://" + g.targets[0]
		rep.Mode = map[bool]string{true: "embedded (spawned, journal in " + cl.dir + ")", false: fmt.Sprintf("redis, %d hubs + 1 runner (spawned)", cfg.Hubs)}[cfg.Spawn]
		if cfg.RedisCluster {
			rep.Mode = fmt.Sprintf("redis cluster (3 masters + 3 replicas, spawned), %d hubs + 1 runner (spawned)", cfg.Hubs)
		}
		if cfg.Floor {
			rep.Mode = "floor (spawned loadtest/floorhub, write " + cfg.FloorWrite + ", no journal)"
			if cfg.FloorJournal {
				rep.Mode = "floor with a journal (spawned loadtest/floorhub, write " + cfg.FloorWrite +
					"; every event journaled before it is written, one write + one fdatasync per batch, in " +
					filepath.Join(cl.hubs[0].data, "floor.log") + ", " + fsType(cl.dir) + ")"
			}
		}
	} else {
		g.targets = strings.Split(cfg.Target, ",")
		if cfg.HubPID > 0 {
			g.pids = []namedPID{{Name: "hub", PID: cfg.HubPID}}
		}
		g.pprofBase = "http://" + g.targets[0]
		rep.Mode = "external " + cfg.Target
	}
	for _, t := range g.targets {
		g.apis = append(g.apis, &api{hc: g.hc, base: "http://" + t})
	}
	g.logf("target %s; %d tab sockets (%d tabs × %s), %d sessions, %d runs of %d tokens every %d ms",
		strings.Join(g.targets, ","), cfg.sockets(), cfg.Tabs, map[bool]string{true: fmt.Sprintf("%d sockets", cfg.Watch), false: "1 socket"}[cfg.FocusAll && cfg.Watch > 1],
		cfg.Sessions, cfg.Runs, cfg.Tokens, cfg.TokenMS)

	// Sessions.
	sids, err := g.createSessions(ctx, cfg.Sessions)
	if err != nil {
		return nil, err
	}

	// Replay of one long run, on a quiet hub.
	if cfg.Replay > 0 {
		r, err := g.replayTest(ctx)
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		rep.Replay = r
	}

	// Baseline, then the tabs.
	rep.Before = g.sample()
	rep.GoBefore = g.goMem()
	g.buildSocks(sids)
	t0 := time.Now()
	progressCtx, stopProgress := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	var drv *driver
	go func() { defer pwg.Done(); g.progress(progressCtx, &drv) }()
	connectHist, failed := g.connectAll(ctx, len(g.socks), func(i int) dialer { return g.socks[i] })
	rep.ConnectWall = time.Since(t0).Seconds()
	rep.Connect = connectHist.summarize()
	rep.ConnectFailed = failed
	if ctx.Err() != nil {
		stopProgress()
		pwg.Wait()
		return nil, ctx.Err()
	}
	_ = ctxsleep.Sleep(ctx, cfg.Settle)
	rep.Idle = g.sample()
	rep.GoIdle = g.goMem()
	rep.ConnsIdle = g.open()
	for _, s := range g.socks {
		if s.url == g.wsURL(0) && s.open.Load() {
			g.connsIdle0++
		}
	}
	if cfg.HeapProfile != "" {
		if err := g.fetch("/debug/pprof/heap?gc=1", cfg.HeapProfile); err != nil {
			g.noteErr("heap profile: " + err.Error())
		}
	}

	// Runs.
	runCtx, stopRuns := context.WithCancel(ctx)
	defer stopRuns()
	if cfg.Runs > 0 {
		drv = &driver{g: g, apis: g.apis, script: simScript{Tokens: cfg.Tokens, TokenMS: cfg.TokenMS, Tools: cfg.Tools},
			rate: cfg.RunRate, waiting: map[string]chan struct{}{}, ended: map[string]bool{}}
		if err := drv.connect(ctx, g.wsURL(0), g.hc); err != nil {
			stopProgress()
			return nil, fmt.Errorf("driver socket: %w", err)
		}
		lim := limiter(runCtx, cfg.RunRate)
		for i := range cfg.Runs {
			drv.wg.Add(1)
			go drv.run(runCtx, i, sids[i], lim)
		}
	}
	var swg sync.WaitGroup
	if cfg.FocusEvery > 0 && cfg.Watch > 1 && !cfg.FocusAll {
		swg.Add(1)
		go func() { defer swg.Done(); g.switcher(runCtx) }()
	}
	if cfg.Runs > 0 || cfg.FocusEvery > 0 {
		_ = ctxsleep.Sleep(ctx, cfg.Warmup)
	}

	// Measure.
	var prof *profileFetch
	if cfg.CPUProfile != "" {
		prof = g.startProfile(cfg.CPUProfile, cfg.Duration)
	}
	g.measuring.Store(true)
	s0, p0, self0 := g.c.snap(), g.sample(), selfCPU()
	var r0 uint64
	if drv != nil {
		r0 = drv.started.Load()
	}
	_ = ctxsleep.Sleep(ctx, cfg.Duration)
	s1, p1, self1 := g.c.snap(), g.sample(), selfCPU()
	g.measuring.Store(false)
	rep.LoadEnd = loadAvg()
	rep.GoEnd = g.goMem()
	rep.ConnsEnd = g.open()
	if drv != nil {
		rep.RunsStarted = drv.started.Load() - r0
		rep.RunStartErrors = drv.startErrs.Load()
		rep.RunsStuck = drv.stuck.Load()
		drv.mu.Lock()
		rep.RunStart = drv.startLat.summarize()
		drv.mu.Unlock()
	}
	stopRuns()
	swg.Wait()
	stopProgress()
	pwg.Wait()
	if prof != nil {
		if err := prof.wait(); err != nil {
			g.noteErr("cpu profile: " + err.Error())
		} else {
			g.logf("CPU profile of %s written to %s", g.targets[0], cfg.CPUProfile)
		}
	}
	if drv != nil {
		drv.cancelActive()
		drv.ws.CloseNow()
		drv.wg.Wait()
	}
	g.closing.Store(true)
	g.closeAll()

	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted before the measurement ended: %w", ctx.Err())
	}
	g.fill(rep, s0, s1, p0, p1, self1-self0)
	rep.write(out)
	if cfg.JSONOut != "" {
		if err := rep.writeJSON(cfg.JSONOut, out); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (g *gen) logf(format string, args ...any) {
	if !g.cfg.Quiet {
		fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...)
	}
}

func (g *gen) wsURL(i int) string { return "ws://" + g.targets[i%len(g.targets)] + "/v1/ws" }

func (g *gen) createSessions(ctx context.Context, n int) ([]string, error) {
	sids := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sid, err := g.apis[(i+w)%len(g.apis)].createSession(ctx, fmt.Sprintf("load %d", i))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				sids[i] = sid
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("create sessions: %w", firstErr)
	}
	return sids, nil
}

// buildSocks lays out the tabs: tab t watches sessions t, t+stride, … (mod
// S) and focuses the first, so watches and focuses spread evenly.
func (g *gen) buildSocks(sids []string) {
	cfg := g.cfg
	S := len(sids)
	stride := max(1, S/max(cfg.Watch, 1))
	for t := range cfg.Tabs {
		var watched []string
		for j := range cfg.Watch {
			watched = append(watched, sids[(t+j*stride)%S])
		}
		main := &sock{g: g, tab: t, url: g.wsURL(t), watched: watched, sh: &g.shards[len(g.socks)%nShards]}
		if len(watched) > 0 {
			main.focusSet = watched
		} else {
			main.focusSet = []string{sids[t%S]}
		}
		if cfg.FocusAll && len(watched) > 1 {
			main.focusSet = watched[:1]
			g.socks = append(g.socks, main)
			for _, sid := range watched[1:] {
				g.socks = append(g.socks, &sock{g: g, tab: t, url: g.wsURL(t), focusSet: []string{sid}, sh: &g.shards[len(g.socks)%nShards]})
			}
			continue
		}
		g.socks = append(g.socks, main)
	}
}

// dialer is a socket the generator opens and then reads until it ends.
type dialer interface {
	dial(ctx context.Context, hc *http.Client) (time.Duration, error)
	readLoop()
}

// connectAll opens the n sockets sock(i) at ConnectRate with ConnectConc
// at once, and starts each one's reader.
func (g *gen) connectAll(ctx context.Context, n int, sock func(i int) dialer) (*hist, int) {
	var h hist
	var mu sync.Mutex
	failed := 0
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lim := limiter(lctx, g.cfg.ConnectRate)
	sem := make(chan struct{}, g.cfg.ConnectConc)
	var wg sync.WaitGroup
	for i := range n {
		s := sock(i)
		select {
		case <-ctx.Done():
			wg.Wait()
			return &h, failed
		case <-lim:
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			took, err := s.dial(ctx, g.hc)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				g.noteErr("connect: " + err.Error())
				return
			}
			h.record(took.Microseconds())
			go s.readLoop()
		}()
	}
	wg.Wait()
	return &h, failed
}

func (g *gen) open() int {
	n := 0
	for _, s := range g.socks {
		if s.open.Load() {
			n++
		}
	}
	return n
}

func (g *gen) closeAll() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, s := range g.socks {
		if s.ws == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.open.Store(false)
			s.ws.CloseNow()
		}()
	}
	wg.Wait()
}

// switcher moves each socket's focus every FocusEvery, spread evenly over
// the interval.
func (g *gen) switcher(ctx context.Context) {
	n := len(g.socks)
	if n == 0 {
		return
	}
	per := g.cfg.FocusEvery / time.Duration(n)
	t0 := time.Now()
	done := 0
	tick := time.NewTicker(max(per, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(t0) * time.Duration(n) / g.cfg.FocusEvery)
		for ; done < due; done++ {
			s := g.socks[done%n]
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := s.switchFocus(wctx); err != nil && ctx.Err() == nil {
				g.noteErr("focus: " + err.Error())
			}
			cancel()
		}
	}
}

// progress prints one line per second.
func (g *gen) progress(ctx context.Context, drv **driver) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev := g.c.snap()
	prevCPU := g.sample()
	t0 := time.Now()
	var win hist
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur := g.c.snap()
		cpu := g.sample()
		win.reset()
		for i := range g.shards {
			sh := &g.shards[i]
			sh.mu.Lock()
			win.merge(&sh.latWin)
			sh.latWin.reset()
			sh.mu.Unlock()
		}
		if g.cfg.Quiet {
			prev, prevCPU = cur, cpu
			continue
		}
		dt := cur.at.Sub(prev.at).Seconds()
		phase := "connect"
		if g.measuring.Load() {
			phase = "measure"
		} else if *drv != nil {
			phase = "warmup"
		}
		runs := ""
		if d := *drv; d != nil {
			runs = fmt.Sprintf(" runs=%d/%d", d.started.Load()-d.done.Load(), d.started.Load())
		}
		hub := ""
		if cpu.ok && prevCPU.ok {
			hub = fmt.Sprintf(" hub_cpu=%.0f%% hub_rss=%s", 100*(cpu.CPU-prevCPU.CPU)/cpu.At.Sub(prevCPU.At).Seconds(), mib(cpu.RSS))
		}
		fmt.Fprintf(os.Stderr, "%5.0fs %-7s conns=%d%s ev/s=%.0f replay/s=%.0f status/s=%.0f MB/s=%.1f p50=%.1fms p99=%.1fms max=%.1fms dup=%d gap=%d%s\n",
			time.Since(t0).Seconds(), phase, g.open(), runs,
			float64(cur.liveEvents-prev.liveEvents)/dt, float64(cur.replayEvts-prev.replayEvts)/dt, float64(cur.statuses-prev.statuses)/dt,
			float64(cur.bytes-prev.bytes)/dt/1e6, float64(win.quantile(0.5))/1000, float64(win.quantile(0.99))/1000, float64(win.max)/1000,
			cur.dups, cur.gaps, hub)
		prev, prevCPU = cur, cpu
	}
}
