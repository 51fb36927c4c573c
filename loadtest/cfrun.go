package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runhub/runhub/internal/ctxsleep"
)

// cfOptions is what a run against Centrifugo needs beyond the workload.
type cfOptions struct {
	Bin         string
	Procs       int // GOMAXPROCS of the Centrifugo process (0: its default)
	Publishers  int // goroutines publishing over the HTTP API
	HistorySize int
	HistoryTTL  time.Duration
	// PingInterval, PongTimeout: Centrifugo's pings (0: its defaults).
	PingInterval, PongTimeout time.Duration
}

// runCentrifugo runs cfg's workload against a Centrifugo it spawns:
// cfg.Tabs sockets, socket t subscribed to channel t mod cfg.Runs (the hub:
// tab t focuses session t mod cfg.Sessions, one run each), each channel
// published to every cfg.TokenMS from its start, the channels started
// cfg.RunRate per second (as the hub's runs are), then cfg.Warmup and
// cfg.Duration measured. Progress goes to stderr, a short report to out.
func runCentrifugo(ctx context.Context, cfg config, o cfOptions, out io.Writer) (*benchRow, error) {
	if cfg.Runs < 1 || cfg.Tabs < 1 || cfg.TokenMS < 1 || o.Publishers < 1 {
		return nil, fmt.Errorf("centrifugo: needs -runs, -tabs, -token-ms and publishers ≥ 1")
	}
	raiseNoFile(uint64(cfg.Tabs)*2 + 1024)
	if have := noFile(); have < uint64(cfg.Tabs)+256 {
		return nil, fmt.Errorf("open-file limit %d is too low for %d sockets: raise it (ulimit -n %d)", have, cfg.Tabs, cfg.Tabs*2+1024)
	}
	row := &benchRow{Target: "centrifugo", Procs: o.Procs, LoadStart: loadAvg()[0]}

	dir, err := os.MkdirTemp("", "runhub-loadtest-centrifugo-")
	if err != nil {
		return nil, err
	}
	cl := &cluster{dir: dir}
	defer cl.stop()
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	srv := newCFServer(addr, o.HistorySize, o.HistoryTTL)
	srv.PingInterval, srv.PongTimeout = o.PingInterval, o.PongTimeout
	conf, err := srv.configJSON()
	if err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		return nil, err
	}
	var env []string
	if o.Procs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", o.Procs))
	}
	c, err := cl.start("centrifugo", env, o.Bin, "--config", confPath)
	if err != nil {
		return nil, err
	}
	c.addr = addr
	if err := waitReady(c, "/health"); err != nil {
		return nil, err
	}

	g := &gen{cfg: cfg, hc: newHTTPClient(), errs: map[string]int{}, pids: []namedPID{{Name: "centrifugo", PID: c.pid()}}}
	g.logf("centrifugo %s (pid %d): %d sockets on %d channels, one message per channel every %d ms",
		addr, c.pid(), cfg.Tabs, cfg.Runs, cfg.TokenMS)
	secret := []byte(srv.HMACSecret)
	socks := make([]*cfSock, cfg.Tabs)
	for t := range socks {
		socks[t] = &cfSock{g: g, tab: t, url: "ws://" + addr + "/connection/websocket", channel: srv.cfChannel(t % cfg.Runs),
			token: cfToken(secret, fmt.Sprintf("tab%d", t), time.Now().Add(time.Hour+cfg.Warmup+cfg.Duration)),
			sh:    &g.shards[t%nShards], check: newSeqCheck()}
	}
	p := &cfPublisher{g: g, url: "http://" + addr + "/api/batch", key: srv.APIKey, period: time.Duration(cfg.TokenMS) * time.Millisecond}
	for i := range cfg.Runs {
		p.streams = append(p.streams, newCFStream(srv.cfChannel(i)))
	}
	pctx, stopProgress := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() { defer pwg.Done(); cfProgress(pctx, g, p, socks) }()
	defer func() { stopProgress(); pwg.Wait() }()

	_, failed := g.connectAll(ctx, len(socks), func(i int) dialer { return socks[i] })
	row.ConnectFailed = failed
	defer g.closeCFSocks(socks)
	if err := ctxsleep.Sleep(ctx, cfg.Settle); err != nil {
		return nil, err
	}

	pubCtx, stopPub := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range o.Publishers {
		wg.Add(1)
		go func() { defer wg.Done(); p.run(pubCtx, w, o.Publishers, t0, cfg.RunRate) }()
	}
	stopPublishers := func() { stopPub(); wg.Wait() }
	defer stopPublishers()
	_ = ctxsleep.Sleep(ctx, cfg.Warmup)

	g.measuring.Store(true)
	s0, p0, self0, pub0 := g.c.snap(), g.sample(), selfCPU(), p.published.Load()
	_ = ctxsleep.Sleep(ctx, cfg.Duration)
	s1, p1, self1, pub1 := g.c.snap(), g.sample(), selfCPU(), p.published.Load()
	g.measuring.Store(false)
	row.LoadEnd = loadAvg()[0]
	stopPublishers()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted before the measurement ended: %w", ctx.Err())
	}
	row.Sockets = len(socks)
	for _, s := range socks {
		if s.open.Load() {
			row.ConnsHeld++
		}
	}
	g.fillRow(row, s0, s1, p0, p1, self1-self0)
	row.PublishedPerS = float64(pub1-pub0) / row.Seconds
	row.PublishErrors = p.errors.Load()
	row.OfferedPerS = float64(cfg.Tabs) * 1000 / float64(cfg.TokenMS)
	row.write(out, fmt.Sprintf("published %.0f messages/s over the HTTP API (%d errors)", row.PublishedPerS, row.PublishErrors))
	return row, nil
}

// fillRow sets the figures of the measurement window common to both
// targets: deliveries, latency, server CPU, bytes, errors.
func (g *gen) fillRow(row *benchRow, s0, s1 snapshot, p0, p1 hubSample, selfCPU float64) {
	dt := s1.at.Sub(s0.at).Seconds()
	row.Seconds = dt
	n := float64(s1.liveEvents - s0.liveEvents)
	row.DeliveredPerS = n / dt
	var lat hist
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		lat.merge(&sh.lat)
		sh.mu.Unlock()
	}
	row.Latency = lat.summarize()
	if p0.ok && p1.ok {
		cpu := p1.CPU - p0.CPU
		row.ServerCPUPct = 100 * cpu / p1.At.Sub(p0.At).Seconds()
		if n > 0 {
			row.CPUPer1000 = cpu * 1e6 / n // µs per delivery = ms per 1,000
		}
		row.RSSEnd = p1.RSS
	}
	if n > 0 {
		row.BytesPerDelivery = float64(s1.bytes-s0.bytes) / n
	}
	row.GenCPUPct = 100 * selfCPU / dt
	row.Dups, row.Gaps, row.Disconnects, row.ErrorMsgs = s1.dups, s1.gaps, s1.disconnects, s1.errorMsgs
	g.errMu.Lock()
	for _, e := range g.errList {
		row.Errors = append(row.Errors, fmt.Sprintf("%s (×%d)", e, g.errs[e]))
	}
	g.errMu.Unlock()
}

// cfPublisher publishes to the channels over the HTTP API: worker w of W
// owns the streams i with i mod W = w and, every period, sends one
// /api/batch request holding one publish per stream it owns that has
// started (stream i starts i/rate seconds after t0). Like the hub's
// simulated runs, it keeps to a schedule and, when more than one period
// late, restarts the schedule from now instead of bursting.
type cfPublisher struct {
	g       *gen
	url     string
	key     string
	period  time.Duration
	streams []*cfStream

	published, errors, requests atomic.Uint64
}

func (p *cfPublisher) run(ctx context.Context, w, workers int, t0 time.Time, rate float64) {
	var mine []*cfStream
	var starts []time.Time
	for i := w; i < len(p.streams); i += workers {
		mine = append(mine, p.streams[i])
		starts = append(starts, t0.Add(time.Duration(float64(i)/rate*float64(time.Second))))
	}
	var body []byte
	due := t0
	for {
		if d := time.Until(due); d > 0 && ctxsleep.Sleep(ctx, d) != nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		active := 0
		for active < len(mine) && !starts[active].After(now) {
			active++
		}
		if active > 0 {
			body = cfBatchBody(body, mine[:active], now)
			p.post(ctx, body, active)
		}
		due = due.Add(p.period)
		if now := time.Now(); now.Sub(due) > p.period {
			due = now // too far behind: do not burst
		}
	}
}

func (p *cfPublisher) post(ctx context.Context, body []byte, n int) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, "POST", p.url, bytes.NewReader(body))
	if err != nil {
		p.fail(ctx, n, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", p.key)
	p.requests.Add(1)
	resp, err := p.g.hc.Do(req)
	if err != nil {
		p.fail(ctx, n, "publish: "+err.Error())
		return
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		p.fail(ctx, n, fmt.Sprintf("publish: %s %v %.200s", resp.Status, err, data))
		return
	}
	bad, first := cfBatchErrors(data, n)
	p.published.Add(uint64(n - bad))
	if bad > 0 {
		p.fail(ctx, bad, first)
	}
}

func (p *cfPublisher) fail(ctx context.Context, n int, msg string) {
	if ctx.Err() != nil {
		return // the end of the test, not an error
	}
	p.errors.Add(uint64(n))
	p.g.noteErr(msg)
}

// closeCFSocks closes the Centrifugo sockets a run connected, telling
// their readers the end is expected.
func (g *gen) closeCFSocks(socks []*cfSock) {
	g.closing.Store(true)
	for _, s := range socks {
		if s.ws != nil {
			s.open.Store(false)
			s.ws.CloseNow()
		}
	}
}
