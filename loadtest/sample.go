package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// hubSample sums /proc figures over the processes under test.
type hubSample struct {
	ok    bool
	CPU   float64
	RSS   int64
	At    time.Time
	Procs []procFigures
}

type procFigures struct {
	Name   string  `json:"name"`
	PID    int     `json:"pid"`
	CPU    float64 `json:"cpu_s"`
	RSS    int64   `json:"rss_bytes"`
	Thread int     `json:"threads"`
	// A spawned hub's counters from its /metrics (per second over the
	// window in a report): events delivered to its tabs, status feed
	// records and bytes and run events it read from Redis; nil for other
	// processes or a hub that has not these metrics.
	Hub *hubCounters `json:"hub,omitempty"`
}

// hubCounters are a hub's counters of what it delivered and read.
type hubCounters struct {
	Delivered   float64 `json:"delivered"`
	FeedRecords float64 `json:"feed_records"`
	FeedBytes   float64 `json:"feed_bytes"`
	RunRecords  float64 `json:"run_records"`
	RunBytes    float64 `json:"run_bytes"`
}

// scrapeHub reads a hub's counters from its /metrics; nil when it has no
// Redis read counters (the embedded journal, an earlier runhub).
func (g *gen) scrapeHub(addr string) *hubCounters {
	resp, err := g.hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return nil
	}
	var c hubCounters
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		name, rest, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			continue
		}
		base, _, _ := strings.Cut(name, "{")
		switch base {
		case "runhub_events_delivered_total":
			c.Delivered += v
		case "runhub_redis_feed_read_records_total":
			c.FeedRecords, found = v, true
		case "runhub_redis_feed_read_bytes_total":
			c.FeedBytes = v
		case "runhub_redis_run_read_records_total":
			c.RunRecords = v
		case "runhub_redis_run_read_bytes_total":
			c.RunBytes = v
		}
	}
	if !found {
		return &hubCounters{Delivered: c.Delivered, FeedRecords: -1}
	}
	return &c
}

func (g *gen) sample() hubSample {
	s := hubSample{At: time.Now()}
	for _, p := range g.pids {
		ps, err := readProc(p.PID)
		if err != nil {
			continue
		}
		s.ok = true
		s.CPU += ps.CPU
		s.RSS += ps.RSS
		f := procFigures{Name: p.Name, PID: p.PID, CPU: ps.CPU, RSS: ps.RSS, Thread: ps.Threads}
		if p.Addr != "" {
			f.Hub = g.scrapeHub(p.Addr)
		}
		s.Procs = append(s.Procs, f)
	}
	return s
}

func (g *gen) goMem() *goMem {
	if g.pprofBase == "" {
		return nil
	}
	m, err := readGoMem(g.hc, g.pprofBase)
	if err != nil {
		return nil
	}
	return &m
}

// profileFetch is a CPU profile being taken from the hub's pprof endpoint.
type profileFetch struct {
	done chan error
}

func (g *gen) startProfile(path string, d time.Duration) *profileFetch {
	p := &profileFetch{done: make(chan error, 1)}
	go func() {
		secs := max(1, int(d.Seconds()))
		resp, err := g.hc.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", g.pprofBase, secs))
		if err != nil {
			p.done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			p.done <- fmt.Errorf("GET /debug/pprof/profile: %s (is RUNHUB_PPROF on?)", resp.Status)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			p.done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		p.done <- err
	}()
	return p
}

// fetch saves GET path of the first hub to a file.
func (g *gen) fetch(path, file string) error {
	resp, err := g.hc.Get(g.pprofBase + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s (is RUNHUB_PPROF on?)", path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (p *profileFetch) wait() error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("timed out")
	}
}

func mib(b int64) string { return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20)) }
