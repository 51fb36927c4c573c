package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

func main() {
	fs := flag.NewFlagSet("regbench", flag.ContinueOnError)
	hubBin := fs.String("hub-bin", "", "the runhub binary, started as `hub serve` on each seeded data directory")
	sizes := fs.String("sessions", "10000,100000,1000000", "registry sizes, comma-separated")
	dir := fs.String("dir", os.TempDir(), "where the data directories are made (use a real disk)")
	lists := fs.Int("lists", 10, "GET /v1/sessions requests timed per size")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ns, err := parseSizes(*sizes)
	if err != nil || *hubBin == "" || *lists < 1 || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: regbench -hub-bin BIN [-sessions N,N,…] [-dir DIR] [-lists N] (-h for more)", err)
		os.Exit(2)
	}
	fmt.Printf("| sessions | seed | start-up | RSS after start-up | GET /v1/sessions p50 / p99 | its bytes | a page of 100 (p50 / p99) | watch of %d ids: every status | watch all: every status | RSS after |\n|---|---|---|---|---|---|---|---|---|---|\n", protocol.MaxWatchSessions)
	for _, n := range ns {
		r, err := measure(*hubBin, *dir, n, *lists)
		if err != nil {
			fmt.Fprintf(os.Stderr, "regbench: %d sessions: %v\n", n, err)
			os.Exit(1)
		}
		fmt.Printf("| %d | %.1f s | %d ms | %.1f MiB | %d / %d ms | %.1f MiB | %d / %d ms | %d ms | %d ms | %.1f MiB |\n", n, r.seed.Seconds(), r.startup.Milliseconds(),
			float64(r.rss)/(1<<20), r.listP50.Milliseconds(), r.listP99.Milliseconds(), float64(r.listBytes)/(1<<20),
			r.pageP50.Milliseconds(), r.pageP99.Milliseconds(),
			r.watch.Milliseconds(), r.watchAll.Milliseconds(), float64(r.rssAfter)/(1<<20))
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < protocol.MaxWatchSessions {
			return nil, fmt.Errorf("-sessions: %q is not a count of at least %d", f, protocol.MaxWatchSessions)
		}
		out = append(out, n)
	}
	return out, nil
}

type result struct {
	seed, startup, listP50, listP99, pageP50, pageP99, watch, watchAll time.Duration
	rss, rssAfter, listBytes                                           int64
}

func measure(hubBin, root string, n, lists int) (result, error) {
	var r result
	data, err := os.MkdirTemp(root, "regbench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(data)
	t0 := time.Now()
	if err := seed(filepath.Join(data, "journal.db"), n); err != nil {
		return r, fmt.Errorf("seed: %w", err)
	}
	r.seed = time.Since(t0)
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	cmd := exec.Command(hubBin, "serve")
	cmd.Env = append(os.Environ(), "RUNHUB_ADDR="+addr, "RUNHUB_DATA="+data)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 = time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	// One goroutine waits for the hub; out is read only once it has
	// exited (exec writes it until then).
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	base := "http://" + addr
	for !healthy(base) {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			return r, fmt.Errorf("hub serve exited (%v) before /healthz answered:\n%s", err, out.String())
		default:
		}
		if time.Since(t0) > 10*time.Minute {
			cmd.Process.Kill()
			err := <-exited
			exited <- err
			return r, fmt.Errorf("no /healthz within 10 minutes:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.startup = time.Since(t0)
	time.Sleep(time.Second)
	r.rss = rss(cmd.Process.Pid)
	var took []time.Duration
	var ids []string
	for range lists {
		var list protocol.SessionList
		size, took1, err := getJSON(base+"/v1/sessions", &list)
		if err != nil {
			return r, err
		}
		took = append(took, took1)
		if len(list.Sessions) != n {
			return r, fmt.Errorf("GET /v1/sessions listed %d sessions of %d", len(list.Sessions), n)
		}
		r.listBytes = size
		if ids == nil {
			for _, s := range list.Sessions[:protocol.MaxWatchSessions] {
				ids = append(ids, s.SessionID)
			}
		}
	}
	r.listP50, r.listP99 = quantiles(took)
	// A page of 100 from the middle of the list (GET /v1/sessions?limit&after).
	took = took[:0]
	mid := fmt.Sprintf("s_regbench%010d", n/2)
	for range 4 * lists {
		var page protocol.SessionList
		_, took1, err := getJSON(base+"/v1/sessions?limit=100&after="+mid, &page)
		if err != nil {
			return r, err
		}
		if len(page.Sessions) != 100 {
			return r, fmt.Errorf("a page of 100 listed %d sessions", len(page.Sessions))
		}
		took = append(took, took1)
	}
	r.pageP50, r.pageP99 = quantiles(took)
	if r.watch, err = watch(addr, false, ids, len(ids)); err != nil {
		return r, err
	}
	if r.watchAll, err = watch(addr, true, nil, n); err != nil {
		return r, err
	}
	r.rssAfter = rss(cmd.Process.Pid)
	return r, nil
}

// quantiles are the p50 and p99 of d (sorted in place).
func quantiles(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
}

// seed writes n finished sessions: each one run of run.started, one
// token and done, as the sim writes them, owned by an open hub's caller.
func seed(path string, n int) error {
	s, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		return err
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 64 {
				if err := seedOne(ctx, s, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	err = <-errs
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

func seedOne(ctx context.Context, s journal.Store, i int) error {
	now := protocol.Timestamp(time.Now())
	sid, rid := fmt.Sprintf("s_regbench%010d", i), fmt.Sprintf("r_regbench%010d", i)
	if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: hub.OpenSubject, Title: "session " + strconv.Itoa(i), CreatedAt: now, Runs: []string{}}); err != nil {
		return err
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid, Owner: hub.OpenSubject, CreatedAt: now}); err != nil {
		return err
	}
	events := []struct {
		typ protocol.EventType
		p   any
	}{
		{protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hello", Provider: "sim"}},
		{protocol.EventTokenDelta, protocol.TokenDeltaPayload{Text: "w0 "}},
		{protocol.EventDone, protocol.DonePayload{Status: "completed"}},
	}
	for _, e := range events {
		ev, err := protocol.NewEvent(rid, sid, e.typ, e.p)
		if err != nil {
			return err
		}
		if _, err := s.Append(ctx, ev, ""); err != nil {
			return err
		}
	}
	return nil
}

// watch dials a tab, watches ids (or all the sessions) and returns the
// time until the statuses of want sessions have arrived.
func watch(addr string, all bool, ids []string, want int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+addr+"/v1/ws", client.Options{})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	t0 := time.Now()
	if err := c.Watch(ctx, all, ids...); err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for len(seen) < want {
		m, err := c.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("watch (all: %v): %d statuses of %d: %w", all, len(seen), want, err)
		}
		if st, ok := m.(*protocol.StatusMessage); ok {
			seen[st.Session.SessionID] = true
		}
	}
	return time.Since(t0), nil
}

// getJSON GETs url and decodes the answer into out; took is the time
// until its last byte (the decoding, this client's cost, is not in it).
func getJSON(url string, out any) (size int64, took time.Duration, err error) {
	t0 := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took = time.Since(t0)
	if err != nil || resp.StatusCode != 200 {
		return 0, took, fmt.Errorf("GET %s: %d %v %.200s", url, resp.StatusCode, err, b)
	}
	return int64(len(b)), took, json.Unmarshal(b, out)
}

func healthy(base string) bool {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// rss is a process's resident set in bytes (0 when unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
