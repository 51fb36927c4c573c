package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/runhub/runhub/internal/ctxsleep"
)

// centrifugoIdle measures Centrifugo's memory per idle socket in the setup
// of the hub's idle tabs (docs/benchmarks.md, "Idle tabs"): cfg.Tabs
// sockets, socket t subscribed to the channels of the cfg.Watch sessions
// of cfg.Sessions that tab t watches in the hub's run (buildSocks), one
// subscription per watched session (the hub's tab also focuses one of
// them, over the same socket), nothing published. Centrifugo's RSS is
// read before the sockets and cfg.Settle after the last one connected;
// the growth over the sockets held is the figure.
func centrifugoIdle(ctx context.Context, cfg config, out io.Writer) error {
	bin, err := findCentrifugo(cfg.CentrifugoBin)
	if err != nil {
		return fmt.Errorf("-centrifugo-idle: %w (give -centrifugo PATH, or go install github.com/centrifugal/centrifugo/v6@v6.9.1)", err)
	}
	if cfg.Tabs < 1 || cfg.Watch < 1 || cfg.Sessions < 1 {
		return fmt.Errorf("-centrifugo-idle: needs -tabs, -watch and -sessions ≥ 1")
	}
	raiseNoFile(uint64(cfg.Tabs)*2 + 1024)
	if have := noFile(); have < uint64(cfg.Tabs)+256 {
		return fmt.Errorf("open-file limit %d is too low for %d sockets: raise it (ulimit -n %d)", have, cfg.Tabs, cfg.Tabs*2+1024)
	}
	dir, err := os.MkdirTemp("", "runhub-loadtest-centrifugo-")
	if err != nil {
		return err
	}
	cl := &cluster{dir: dir}
	defer cl.stop()
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	srv := newCFServer(addr, cfg.CFHistory, cfg.CFHistoryTTL)
	conf, err := srv.configJSON()
	if err != nil {
		return err
	}
	confPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		return err
	}
	var env []string
	if cfg.CFProcs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", cfg.CFProcs))
	}
	c, err := cl.start("centrifugo", env, bin, "--config", confPath)
	if err != nil {
		return err
	}
	c.addr = addr
	if err := waitReady(c, "/health"); err != nil {
		return err
	}
	g := &gen{cfg: cfg, hc: newHTTPClient(), errs: map[string]int{}, pids: []namedPID{{Name: "centrifugo", PID: c.pid()}}}
	load0 := loadAvg()
	g.logf("centrifugo %s (pid %d, %s): %d sockets, each subscribed to %d of %d channels, nothing published",
		addr, c.pid(), centrifugoVersion(bin), cfg.Tabs, cfg.Watch, cfg.Sessions)
	secret := []byte(srv.HMACSecret)
	stride := max(1, cfg.Sessions/cfg.Watch)
	socks := make([]*cfSock, cfg.Tabs)
	for t := range socks {
		var chans []string
		for j := range cfg.Watch {
			chans = append(chans, srv.cfChannel((t+j*stride)%cfg.Sessions))
		}
		socks[t] = &cfSock{g: g, tab: t, url: "ws://" + addr + "/connection/websocket", channel: chans[0], more: chans[1:],
			token: cfToken(secret, fmt.Sprintf("tab%d", t), time.Now().Add(time.Hour+cfg.Settle)),
			sh:    &g.shards[t%nShards], check: newSeqCheck()}
	}
	before := g.sample()
	t0 := time.Now()
	_, failed := g.connectAll(ctx, len(socks), func(i int) dialer { return socks[i] })
	wall := time.Since(t0)
	defer g.closeCFSocks(socks)
	if err := ctxsleep.Sleep(ctx, cfg.Settle); err != nil {
		return err
	}
	idle := g.sample()
	held := 0
	for _, s := range socks {
		if s.open.Load() {
			held++
		}
	}
	load1 := loadAvg()
	fmt.Fprintf(out, "centrifugo idle sockets        %s, %d CPUs\n", centrifugoVersion(bin), runtime.NumCPU())
	fmt.Fprintf(out, "load average                   %.2f %.2f %.2f at start, %.2f %.2f %.2f at end\n", load0[0], load0[1], load0[2], load1[0], load1[1], load1[2])
	fmt.Fprintf(out, "sockets held                   %d of %d (%d failed to connect), connected in %.1f s\n", held, cfg.Tabs, failed, wall.Seconds())
	if !before.ok || !idle.ok || held == 0 {
		return fmt.Errorf("could not read Centrifugo's RSS")
	}
	fmt.Fprintf(out, "centrifugo RSS                 %s before, %s idle with the sockets (%s after the last connected)\n", mib(before.RSS), mib(idle.RSS), cfg.Settle)
	fmt.Fprintf(out, "memory per connection          %.1f KiB RSS\n", float64(idle.RSS-before.RSS)/float64(held)/1024)
	return nil
}
