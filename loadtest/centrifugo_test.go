//go:build centrifugo

// The integration tests against a real Centrifugo binary. They are opt-in
// (make test-centrifugo = go test -tags centrifugo -run TestCentrifugo
// ./loadtest) and fail, rather than skip, without the binary: give
// CENTRIFUGO=/path or put centrifugo on PATH (go install
// github.com/centrifugal/centrifugo/v6@v6.9.1).

package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func centrifugoBin(t *testing.T) string {
	t.Helper()
	bin, err := findCentrifugo("")
	if err != nil {
		t.Fatalf("these tests need a Centrifugo binary (CENTRIFUGO=/path, or centrifugo on PATH; go install github.com/centrifugal/centrifugo/v6@v6.9.1): %v", err)
	}
	return bin
}

func smallWorkload(t *testing.T, extra ...string) config {
	t.Helper()
	args := append([]string{"-compare", "centrifugo", "-tabs", "40", "-sessions", "8", "-runs", "8", "-run-rate", "100",
		"-warmup", "1s", "-duration", "3s", "-settle", "100ms", "-quiet", "-centrifugo-publishers", "3"}, extra...)
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The client and publishers against the real server: every socket
// connects with its token and subscribes, every stream's messages reach
// its five sockets in order with none missing or repeated, pings (every
// second here) are answered so no socket is dropped, and the server's CPU
// is read.
func TestCentrifugoRun(t *testing.T) {
	bin := centrifugoBin(t)
	cfg := smallWorkload(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	row, err := runCentrifugo(ctx, cfg, cfOptions{Bin: bin, Publishers: 3, HistorySize: 100, HistoryTTL: time.Minute,
		PingInterval: time.Second, PongTimeout: 500 * time.Millisecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if row.ConnsHeld != 40 || row.ConnectFailed != 0 || row.Disconnects != 0 {
		t.Errorf("sockets: %d held, %d failed, %d dropped: %v", row.ConnsHeld, row.ConnectFailed, row.Disconnects, row.Errors)
	}
	if row.Dups != 0 || row.Gaps != 0 || row.ErrorMsgs != 0 || row.PublishErrors != 0 {
		t.Errorf("duplicates %d, gaps %d, error messages %d, publish errors %d: %v", row.Dups, row.Gaps, row.ErrorMsgs, row.PublishErrors, row.Errors)
	}
	if row.DeliveredPerS <= 0 || row.PublishedPerS <= 0 || row.Latency.Count == 0 || row.CPUPer1000 <= 0 || row.OfferedPerS != 2000 {
		t.Errorf("nothing measured: %+v", row)
	}
	// The data is shaped like the hub's events: a push is a few hundred bytes.
	if row.BytesPerDelivery < 200 || row.BytesPerDelivery > 600 {
		t.Errorf("%.0f bytes per delivery", row.BytesPerDelivery)
	}
}

// A wrong API key is reported as failed publishes, and the sockets then
// see nothing: the generator says so instead of measuring silence.
func TestCentrifugoPublishErrors(t *testing.T) {
	bin := centrifugoBin(t)
	cfg := smallWorkload(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := &gen{cfg: cfg, hc: newHTTPClient(), errs: map[string]int{}}
	p := &cfPublisher{g: g, key: "wrong", period: 20 * time.Millisecond}
	cl := &cluster{}
	dir := t.TempDir()
	addr, _ := freeLoopbackAddr()
	srv := newCFServer(addr, 10, time.Minute)
	conf, _ := srv.configJSON()
	path := dir + "/config.json"
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := cl.start("centrifugo", nil, bin, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.stop()
	c.addr = addr
	if err := waitReady(c, "/health"); err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + addr + "/api/batch"
	p.streams = []*cfStream{newCFStream(srv.cfChannel(0))}
	p.post(ctx, cfBatchBody(nil, p.streams, time.Now()), 1)
	if p.errors.Load() != 1 || p.published.Load() != 0 || len(g.errList) != 1 || !strings.Contains(g.errList[0], "401") {
		t.Errorf("wrong key: %d errors, %d published, %v", p.errors.Load(), p.published.Load(), g.errList)
	}
	// The right key, an unknown namespace: an error in the batch's reply.
	p.key = srv.APIKey
	p.streams = []*cfStream{newCFStream("nosuchns:1"), newCFStream(srv.cfChannel(1))}
	p.post(ctx, cfBatchBody(nil, p.streams, time.Now()), 2)
	if p.errors.Load() != 2 || p.published.Load() != 1 {
		t.Errorf("unknown namespace: %d errors (want 2), %d published (want 1), %v", p.errors.Load(), p.published.Load(), g.errList)
	}
}

// The whole comparison, one short round: Centrifugo, then the hub built
// from this module at GOMAXPROCS 1, and a table with both rows and the
// ratios.
func TestCentrifugoCompare(t *testing.T) {
	centrifugoBin(t)
	cfg := smallWorkload(t, "-hub-procs", "1", "-rounds", "1")
	// Building the hub takes minutes on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	rows, err := compare(ctx, cfg, "go test", &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if len(rows) != 2 || rows[0].Target != "centrifugo" || rows[1].Target != "hub" || rows[1].Procs != 1 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.Dups != 0 || r.Gaps != 0 || r.ConnsHeld != 40 || r.DeliveredPerS <= 0 || r.CPUPer1000 <= 0 {
			t.Errorf("%s: %+v", r.Target, r)
		}
	}
	md := out.String()
	for _, want := range []string{"| 1 | Centrifugo |", "| 1 | hub | 1 |", "hub ÷ Centrifugo", "fsync on every journal commit", "×"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q", want)
		}
	}
}
