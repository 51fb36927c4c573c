package main

import (
	"fmt"
	"io"
	"os"
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
		s.Procs = append(s.Procs, procFigures{p.Name, p.PID, ps.CPU, ps.RSS, ps.Threads})
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
