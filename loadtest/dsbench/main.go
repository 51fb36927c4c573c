package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	fs := flag.NewFlagSet("dsbench", flag.ContinueOnError)
	target := fs.String("url", "", "measure the Durable Streams server whose stream root is this URL (e.g. http://127.0.0.1:8080/v1/stream)")
	hubBin := fs.String("hub-bin", "", "compare: the runhub binary (started as `hub serve` on a fresh embedded journal)")
	caddyBin := fs.String("caddy-bin", "", "compare: the durable-streams Caddy plugin's server binary (file store in a fresh data_dir)")
	anchorBin := fs.String("anchor-bin", "", "compare: also an earlier runhub build, first in every round (anchor, hub, caddy)")
	rounds := fs.Int("rounds", 4, "compare: rounds, alternated hub, caddy, hub, caddy, … (with -anchor-bin: anchor, hub, caddy)")
	dir := fs.String("dir", os.TempDir(), "compare: where the servers' data directories are made (use a real disk)")
	jsonOut := fs.String("json", "", "also write every round's raw figures to this file")
	sz := defaultSizes()
	fs.IntVar(&sz.Latency, "latency", sz.Latency, "latency iterations per round")
	fs.IntVar(&sz.SmallIters, "small", sz.SmallIters, "small-message iterations per round")
	fs.IntVar(&sz.LargeIters, "large", sz.LargeIters, "large-message iterations per round")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if (*target == "") == (*hubBin == "" || *caddyBin == "") || *rounds < 1 || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: dsbench -url URL | -hub-bin BIN -caddy-bin BIN [-rounds N] [-dir DIR] (-h for more)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rs []round
	var err error
	if *target != "" {
		var r result
		r, err = newClient(strings.TrimSuffix(*target, "/")).run(ctx, sz)
		rs = []round{{Server: *target, Result: r}}
	} else {
		servers := []server{hubServer("runhub", *hubBin), caddyServer(*caddyBin)}
		if *anchorBin != "" {
			servers = append([]server{hubServer("runhub-anchor", *anchorBin)}, servers...)
		}
		rs, err = compare(ctx, servers, *rounds, *dir, sz)
	}
	if len(rs) > 0 {
		writeTable(os.Stdout, rs)
	}
	if *jsonOut != "" && len(rs) > 0 {
		b, _ := json.MarshalIndent(rs, "", "  ")
		if werr := os.WriteFile(*jsonOut, b, 0o644); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dsbench:", err)
		os.Exit(1)
	}
}

// round is one server's figures from one round.
type round struct {
	N       int     `json:"round"`
	Server  string  `json:"server"`
	LoadAvg string  `json:"loadavg"` // /proc/loadavg before the round
	Result  result  `json:"result"`
	Secs    float64 `json:"seconds"`
}

// server is how to start one implementation on addr with its data in dir.
type server struct {
	Name  string
	Start func(addr, dir string) *exec.Cmd
	Root  string // the stream root's path
}

func hubServer(name, bin string) server {
	return server{Name: name, Root: "/v1/stream", Start: func(addr, dir string) *exec.Cmd {
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "RUNHUB_ADDR="+addr, "RUNHUB_DATA="+dir)
		return cmd
	}}
}

func caddyServer(bin string) server {
	return server{Name: "caddy", Root: "/v1/stream", Start: func(addr, dir string) *exec.Cmd {
		_, port, _ := net.SplitHostPort(addr)
		conf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n}\n\nhttp://127.0.0.1:%s {\n\troute /v1/stream/* {\n\t\tdurable_streams {\n\t\t\tdata_dir %s\n\t\t}\n\t}\n}\n", port, filepath.Join(dir, "streams"))
		file := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			panic(err) // the directory was just made
		}
		return exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	}}
}

// compare runs every server once per round, alternating, each on a fresh
// data directory and a free port, stopped after its round.
func compare(ctx context.Context, servers []server, rounds int, dir string, sz sizes) ([]round, error) {
	var out []round
	for n := 1; n <= rounds; n++ {
		for _, s := range servers {
			r, err := measure(ctx, s, dir, sz)
			r.N = n
			if err != nil {
				return out, fmt.Errorf("round %d, %s: %w", n, s.Name, err)
			}
			out = append(out, r)
			fmt.Fprintf(os.Stderr, "dsbench: round %d %s: latency p50 %.2f ms p99 %.2f ms, small %.0f msg/s, large %.1f msg/s\n",
				n, s.Name, quantile(r.Result.LatencyMS, 0.5), quantile(r.Result.LatencyMS, 0.99), mean(r.Result.SmallMsgPerS), mean(r.Result.LargeMsgPerS))
		}
	}
	return out, nil
}

func measure(ctx context.Context, s server, parent string, sz sizes) (round, error) {
	r := round{Server: s.Name}
	dir, err := os.MkdirTemp(parent, "dsbench-"+s.Name+"-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	cmd := s.Start(addr, dir)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return r, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	base := "http://" + addr + s.Root
	if err := waitUp(ctx, base, exited); err != nil {
		return r, fmt.Errorf("%w (log: %s)", err, tail(filepath.Join(dir, "server.log")))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	start := time.Now()
	r.Result, err = newClient(base).run(ctx, sz)
	r.Secs = time.Since(start).Seconds()
	return r, err
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitUp waits until the server answers a HEAD of a stream that does not
// exist (any HTTP answer).
func waitUp(ctx context.Context, base string, exited <-chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("the server exited: %v", err)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, base+"/dsbench-probe", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the server did not answer within 30 s")
}

func tail(file string) string {
	b, _ := os.ReadFile(file)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// writeTable writes every round and, per server, the pooled latency
// quantiles and the median of the rounds' throughputs.
func writeTable(w io.Writer, rs []round) {
	fmt.Fprintln(w, "| round | server | load avg | latency p50 ms | p99 ms | max ms | small msg/s | large msg/s (1 MiB each: MiB/s) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	var order []string
	pooled := map[string]*result{}
	for _, r := range rs {
		l := r.Result.LatencyMS
		fmt.Fprintf(w, "| %d | %s | %s | %.2f | %.2f | %.2f | %.0f | %.1f |\n", r.N, r.Server, r.LoadAvg,
			quantile(l, 0.5), quantile(l, 0.99), quantile(l, 1), mean(r.Result.SmallMsgPerS), mean(r.Result.LargeMsgPerS))
		p, ok := pooled[r.Server]
		if !ok {
			p = &result{}
			pooled[r.Server] = p
			order = append(order, r.Server)
		}
		p.LatencyMS = append(p.LatencyMS, l...)
		p.SmallMsgPerS = append(p.SmallMsgPerS, mean(r.Result.SmallMsgPerS))
		p.LargeMsgPerS = append(p.LargeMsgPerS, mean(r.Result.LargeMsgPerS))
	}
	for _, s := range order {
		p := pooled[s]
		fmt.Fprintf(w, "| all (latency pooled, throughput median of rounds) | %s | | %.2f | %.2f | %.2f | %.0f | %.1f |\n", s,
			quantile(p.LatencyMS, 0.5), quantile(p.LatencyMS, 0.99), quantile(p.LatencyMS, 1),
			quantile(p.SmallMsgPerS, 0.5), quantile(p.LargeMsgPerS, 0.5))
	}
}
