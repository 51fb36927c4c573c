package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// report is the result of one load test (also its JSON form).
type report struct {
	Config    config     `json:"config"`
	Mode      string     `json:"mode"`
	Date      string     `json:"date"`
	CPUs      int        `json:"cpus"`
	GoVersion string     `json:"go_version"`
	LoadStart [3]float64 `json:"loadavg_start"`
	LoadEnd   [3]float64 `json:"loadavg_end"`

	Sockets       int     `json:"sockets"`
	ConnsIdle     int     `json:"conns_after_connect"`
	ConnsEnd      int     `json:"conns_held"`
	ConnectFailed int     `json:"connect_failed"`
	ConnectWall   float64 `json:"connect_wall_s"`
	Connect       summary `json:"connect_time"`

	// Memory of the processes under test (sum over them), from /proc.
	Before, Idle    hubSample `json:"-"`
	RSSBefore       int64     `json:"rss_before_bytes"`
	RSSIdle         int64     `json:"rss_idle_bytes"`
	RSSEnd          int64     `json:"rss_end_bytes"`
	RSSPerConn      float64   `json:"rss_per_conn_bytes"`
	HeapPerConn     float64   `json:"heap_per_conn_bytes,omitempty"`
	StackPerConn    float64   `json:"stack_per_conn_bytes,omitempty"`
	GoroutinesPerCn float64   `json:"goroutines_per_conn,omitempty"`
	GoBefore        *goMem    `json:"go_before,omitempty"`
	GoIdle          *goMem    `json:"go_idle,omitempty"`
	GoEnd           *goMem    `json:"go_end,omitempty"`

	// Over the measurement window.
	Seconds         float64       `json:"seconds"`
	LiveEventsPerS  float64       `json:"live_events_per_s"`
	ReplayEvtsPerS  float64       `json:"replay_events_per_s"`
	StatusesPerS    float64       `json:"statuses_per_s"`
	FramesPerS      float64       `json:"frames_per_s"`
	BytesPerTabPerS float64       `json:"bytes_per_tab_per_s"`
	Latency         summary       `json:"latency"`
	FocusReplay     summary       `json:"focus_replay_time"`
	FocusReplayN    summary       `json:"focus_replay_events"` // counts, in the *_ms fields ÷ 1000
	FocusSwitches   uint64        `json:"focus_switches"`
	StaleEvents     uint64        `json:"stale_events"`
	Dups            uint64        `json:"duplicates"`
	Gaps            uint64        `json:"gaps"`
	Reseen          uint64        `json:"reseen_on_refocus"`
	ErrorMsgs       uint64        `json:"error_messages"`
	Disconnects     uint64        `json:"disconnects"`
	RunsStarted     uint64        `json:"runs_started"`
	RunStartErrors  uint64        `json:"run_start_errors"`
	RunsStuck       uint64        `json:"runs_stuck"`
	RunStart        summary       `json:"run_start_time"`
	HubCPUPct       float64       `json:"hub_cpu_percent"`
	HubCPUPerEvent  float64       `json:"hub_cpu_us_per_event"`
	HubCPUPerMsg    float64       `json:"hub_cpu_us_per_message"`
	GenCPUPct       float64       `json:"generator_cpu_percent"`
	Procs           []procFigures `json:"procs,omitempty"`

	Replay *replayResult `json:"replay,omitempty"`
	Errors []string      `json:"errors,omitempty"`
}

func (g *gen) fill(r *report, s0, s1 snapshot, p0, p1 hubSample, selfCPU float64) {
	r.Sockets = len(g.socks)
	r.RSSBefore, r.RSSIdle, r.RSSEnd = r.Before.RSS, r.Idle.RSS, p1.RSS
	if r.ConnsIdle > 0 && r.Idle.ok {
		r.RSSPerConn = float64(r.Idle.RSS-r.Before.RSS) / float64(r.ConnsIdle)
	}
	if r.GoBefore != nil && r.GoIdle != nil && g.connsIdle0 > 0 {
		// The Go figures are the first hub's: divide by its sockets only.
		n := float64(g.connsIdle0)
		r.HeapPerConn = float64(r.GoIdle.HeapInuse-r.GoBefore.HeapInuse) / n
		r.StackPerConn = float64(r.GoIdle.StackInuse-r.GoBefore.StackInuse) / n
		r.GoroutinesPerCn = float64(r.GoIdle.Goroutines-r.GoBefore.Goroutines) / n
	}
	dt := s1.at.Sub(s0.at).Seconds()
	r.Seconds = dt
	live := float64(s1.liveEvents - s0.liveEvents)
	replay := float64(s1.replayEvts - s0.replayEvts)
	statuses := float64(s1.statuses - s0.statuses)
	msgs := live + replay + statuses + float64(s1.others-s0.others)
	r.LiveEventsPerS = live / dt
	r.ReplayEvtsPerS = replay / dt
	r.StatusesPerS = statuses / dt
	r.FramesPerS = float64(s1.frames-s0.frames) / dt
	if g.cfg.Tabs > 0 {
		r.BytesPerTabPerS = float64(s1.bytes-s0.bytes) / dt / float64(g.cfg.Tabs)
	}
	var lat, rep, repN hist
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		lat.merge(&sh.lat)
		rep.merge(&sh.replay)
		repN.merge(&sh.replayN)
		sh.mu.Unlock()
	}
	r.Latency, r.FocusReplay, r.FocusReplayN = lat.summarize(), rep.summarize(), repN.summarize()
	r.FocusSwitches = s1.focusSwitches - s0.focusSwitches
	r.StaleEvents = s1.staleEvents
	r.Dups, r.Gaps, r.Reseen = s1.dups, s1.gaps, s1.reseen
	r.ErrorMsgs, r.Disconnects = s1.errorMsgs, s1.disconnects
	if p0.ok && p1.ok {
		cpu := p1.CPU - p0.CPU
		r.HubCPUPct = 100 * cpu / p1.At.Sub(p0.At).Seconds()
		if n := live + replay; n > 0 {
			r.HubCPUPerEvent = cpu * 1e6 / n
		}
		if msgs > 0 {
			r.HubCPUPerMsg = cpu * 1e6 / msgs
		}
		r.Procs = p1.Procs
		for i := range r.Procs {
			for _, q := range p0.Procs {
				if q.PID == r.Procs[i].PID {
					r.Procs[i].CPU = 100 * (r.Procs[i].CPU - q.CPU) / dt // as a percentage over the window
					if h, h0 := r.Procs[i].Hub, q.Hub; h != nil && h0 != nil {
						rate := func(a, b float64) float64 { return (a - b) / dt }
						r.Procs[i].Hub = &hubCounters{Delivered: rate(h.Delivered, h0.Delivered),
							FeedRecords: rate(h.FeedRecords, h0.FeedRecords), FeedBytes: rate(h.FeedBytes, h0.FeedBytes),
							RunRecords: rate(h.RunRecords, h0.RunRecords), RunBytes: rate(h.RunBytes, h0.RunBytes)}
						if h.FeedRecords < 0 {
							r.Procs[i].Hub.FeedRecords = -1
						}
					}
				}
			}
		}
	}
	r.GenCPUPct = 100 * selfCPU / dt
	g.errMu.Lock()
	for _, e := range g.errList {
		r.Errors = append(r.Errors, fmt.Sprintf("%s (×%d)", e, g.errs[e]))
	}
	g.errMu.Unlock()
}

func (r *report) write(out io.Writer) {
	c := r.Config
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	kib := func(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }
	lat := func(s summary) string {
		if s.Count == 0 {
			return "-"
		}
		return fmt.Sprintf("p50 %.2f  p95 %.2f  p99 %.2f  p99.9 %.2f  max %.2f ms  (n=%d)", s.P50, s.P95, s.P99, s.P999, s.Max, s.Count)
	}
	fmt.Fprintf(w, "\nrunhub load test\t%s\n", r.Date)
	fmt.Fprintf(w, "mode\t%s; %d CPUs, %s\n", r.Mode, r.CPUs, r.GoVersion)
	fmt.Fprintf(w, "load average\t%.2f %.2f %.2f at start, %.2f %.2f %.2f at end\n", r.LoadStart[0], r.LoadStart[1], r.LoadStart[2], r.LoadEnd[0], r.LoadEnd[1], r.LoadEnd[2])
	focus := "focus one watched session"
	if c.FocusAll && c.Watch > 1 {
		focus = fmt.Sprintf("every token to every tab (%d sockets per tab, each focusing one watched session)", c.Watch)
	} else if c.FocusEvery > 0 && c.Watch > 1 {
		focus += fmt.Sprintf(", switch every %v", c.FocusEvery)
	}
	if c.CompactReplay {
		focus += "; compacted catch-up"
	} else {
		focus += "; catch-up event by event"
	}
	fmt.Fprintf(w, "scenario\t%d tabs × %d watched of %d sessions; %s\n", c.Tabs, c.Watch, c.Sessions, focus)
	if c.Runs > 0 {
		fmt.Fprintf(w, "runs\t%d concurrent, ≤ %.0f starts/s, %d tokens every %d ms, %d tools; warmup %v, measured %.1f s\n", c.Runs, c.RunRate, c.Tokens, c.TokenMS, c.Tools, c.Warmup, r.Seconds)
	} else {
		fmt.Fprintf(w, "runs\tnone (idle); measured %.1f s\n", r.Seconds)
	}
	fmt.Fprintf(w, "connections held\t%d of %d (%d failed to connect, %d dropped)\n", r.ConnsEnd, r.Sockets, r.ConnectFailed, r.Disconnects)
	fmt.Fprintf(w, "connect time\t%s; all in %.1f s\n", lat(r.Connect), r.ConnectWall)
	if r.RSSIdle > 0 {
		fmt.Fprintf(w, "hub RSS\t%s before, %s idle with the sockets, %s at end\n", mib(r.RSSBefore), mib(r.RSSIdle), mib(r.RSSEnd))
		fmt.Fprintf(w, "memory per connection\t%s RSS", kib(r.RSSPerConn))
		if r.GoIdle != nil {
			fmt.Fprintf(w, " (Go heap %s + stacks %s; %.1f goroutines)", kib(r.HeapPerConn), kib(r.StackPerConn), r.GoroutinesPerCn)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "events delivered\t%.0f/s live + %.0f/s replayed; %.0f statuses/s; %.0f frames/s\n", r.LiveEventsPerS, r.ReplayEvtsPerS, r.StatusesPerS, r.FramesPerS)
	fmt.Fprintf(w, "latency created_at→receipt\t%s\n", lat(r.Latency))
	fmt.Fprintf(w, "bytes per tab\t%s/s\n", kib(r.BytesPerTabPerS))
	if r.FocusSwitches > 0 || r.FocusReplay.Count > 0 {
		fmt.Fprintf(w, "focus replay (focus→replayed)\t%s; %d switches, %.0f events replayed per focus (mean)\n", lat(r.FocusReplay), r.FocusSwitches, r.FocusReplayN.Mean*1000)
	}
	fmt.Fprintf(w, "duplicates / gaps\t%d / %d  (events seen again across a refocus: %d; in flight from a previous focus: %d)\n", r.Dups, r.Gaps, r.Reseen, r.StaleEvents)
	if c.Runs > 0 {
		fmt.Fprintf(w, "runs\t%d started while measuring; start %s; %d start errors, %d stuck\n", r.RunsStarted, lat(r.RunStart), r.RunStartErrors, r.RunsStuck)
	}
	if len(r.Procs) > 0 {
		fmt.Fprintf(w, "hub CPU\t%.0f%% of one core; %.1f µs per delivered event, %.1f µs per message\n", r.HubCPUPct, r.HubCPUPerEvent, r.HubCPUPerMsg)
		fmt.Fprintf(w, "hub CPU per 1,000 deliveries\t%.1f ms (events); %.1f ms (every message, statuses included)\n", r.HubCPUPerEvent, r.HubCPUPerMsg)
		var parts []string
		for _, p := range r.Procs {
			parts = append(parts, fmt.Sprintf("%s %.0f%% %s", p.Name, p.CPU, mib(p.RSS)))
		}
		fmt.Fprintf(w, "processes\t%s\n", strings.Join(parts, ", "))
		for _, p := range r.Procs {
			if h := p.Hub; h != nil {
				reads := "no Redis read counters"
				if h.FeedRecords >= 0 {
					reads = fmt.Sprintf("read from Redis %.0f feed records/s (%.1f KiB/s), %.0f run events/s (%.1f KiB/s)",
						h.FeedRecords, h.FeedBytes/1024, h.RunRecords, h.RunBytes/1024)
				}
				fmt.Fprintf(w, "  %s\t%.0f%% CPU; delivered %.0f events/s to its tabs; %s\n", p.Name, p.CPU, h.Delivered, reads)
			}
		}
	} else {
		fmt.Fprintf(w, "hub CPU\t- (give -hub-pid)\n")
	}
	fmt.Fprintf(w, "generator CPU\t%.0f%% of one core\n", r.GenCPUPct)
	if rp := r.Replay; rp != nil {
		fmt.Fprintf(w, "replay of one run\t%d events per focus: %s; %.1f MiB and %.1f ms hub CPU per focus; complete %v, dups %d, gaps %d (filled in %.1f s)\n",
			rp.Events, lat(rp.Time), float64(rp.Bytes)/(1<<20), rp.HubCPU*1000, rp.Complete, rp.Dups, rp.Gaps, rp.Fill)
	}
	fmt.Fprintf(w, "errors\t%d error messages; %d distinct problems\n", r.ErrorMsgs, len(r.Errors))
	for _, e := range r.Errors {
		fmt.Fprintf(w, "\t%s\n", e)
	}
	w.Flush()
}

func (r *report) writeJSON(path string, out io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = out.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
