package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// compareHeader is what the comparison's table says about itself.
type compareHeader struct {
	Date       string `json:"date"`
	CPUs       int    `json:"cpus"`
	Go         string `json:"go_version"`
	Hub        string `json:"hub"`
	Centrifugo string `json:"centrifugo"`
	Fsync      string `json:"fsync"`
	Command    string `json:"command"`
	Cfg        config `json:"config"`
	Procs      []int  `json:"hub_gomaxprocs"`
}

// thousands formats v rounded, with commas: 49812.4 → "49,812".
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v < 0 && s != "0" {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func serverLabel(r *benchRow) string {
	switch r.Target {
	case "centrifugo":
		return "Centrifugo"
	case "floor":
		return "floor"
	}
	return "hub"
}

// writeMarkdown writes the comparison ready to paste into
// docs/benchmarks.md: how it was run, one row per run, the medians, and
// hub ÷ Centrifugo (and hub CPU ÷ the floor's, with floor rows).
func writeMarkdown(out io.Writer, h compareHeader, rows []*benchRow) {
	c := h.Cfg
	cfRows, hubs, floorRows := groups(rows)
	order := []string{"Centrifugo"}
	if len(floorRows) > 0 {
		order = append(order, "floor")
	}
	for _, p := range h.Procs {
		order = append(order, "hub GOMAXPROCS "+procsLabel(p))
	}
	offered := float64(c.Tabs) * 1000 / float64(max(c.TokenMS, 1))
	w := func(format string, args ...any) { fmt.Fprintf(out, format, args...) }
	w("\n### The hub and Centrifugo on Centrifugo's workload (%s)\n\n", h.Date)
	w("```\n%s\n```\n\n", h.Command)
	w("- Workload, the same for both: %s sockets, %d streams × %s messages/s, %d sockets per stream: **%s deliveries/s offered**; "+
		"streams started %.0f per second; warmup %v, %v measured per run; %d round(s), each in the order %s.\n",
		thousands(float64(c.Tabs)), c.Runs, trimFloat(1000/float64(max(c.TokenMS, 1))), c.Tabs/max(c.Runs, 1), thousands(offered),
		c.RunRate, c.Warmup, c.Duration, c.Rounds, strings.Join(order, ", "))
	w("- Machine: %d CPUs, generator built with %s; the generator runs on the same machine as the server.\n", h.CPUs, h.Go)
	w("- Hub: %s; spawned with the embedded journal, %s. Each stream is one run of the simulator (`token.delta` every %d ms); tab *t* focuses session *t* mod %d.\n",
		h.Hub, h.Fsync, c.TokenMS, c.Sessions)
	w("- Centrifugo: %s; GOMAXPROCS %s; memory engine, history %d messages / %v per channel, connection JWTs (HS256); "+
		"socket *t* subscribes to channel *t* mod %d; %d publishers each send one `/api/batch` request (one publish per stream it owns) every %d ms; "+
		"the data is an event envelope shaped like the hub's `token.delta` (same fields, ids of the same length).\n",
		h.Centrifugo, procsLabel(c.CFProcs), c.CFHistory, c.CFHistoryTTL, c.Runs, c.CFPublishers, c.TokenMS)
	if c.FullDecode {
		w("- Client: every socket of both servers also decodes each event's whole message with encoding/json into a generic value after timing it (`-full-decode`), as a client that reads every field would.\n")
	}
	if len(floorRows) > 0 {
		w("- Floor: loadtest/floorhub, which encodes each event once and writes it to each focusing socket with one write system call: " +
			"no journal, no queue, no statuses; what one write per delivery costs on this machine in this window.\n")
	}
	w("- *delivered/s*: publications (events) the sockets received per second while measuring; *p50/p99/max*: received − the `created_at` in the data " +
		"(hub: stamped by the journal when the append is prepared, before its batch is written and fdatasynced; Centrifugo: stamped by the publisher before its HTTP request), " +
		"the receipt time taken by the same Go WebSocket client (github.com/coder/websocket) on the same clock when a whole frame has been read, before it is parsed: the same-client definition; " +
		"*server CPU*: user+system time of the server process from /proc; *CPU per 1,000 deliveries*: that time over the deliveries, in ms; " +
		"*bytes/delivery*: everything the sockets received (statuses, pings) over the deliveries.\n\n")

	w("| round | server | GOMAXPROCS | load (1 min) start → end | delivered/s | %% of offered | p50 ms | p99 ms | max ms | server CPU | **CPU ms per 1,000 deliveries** | bytes/delivery | sockets held | dups / gaps |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		w("| %d | %s | %s | %.2f → %.2f | %s | %.1f%% | %.1f | %.1f | %.1f | %.0f%% | **%.1f** | %.0f | %d/%d | %d / %d |\n",
			r.Round, serverLabel(r), procsLabel(r.Procs), r.LoadStart, r.LoadEnd, thousands(r.DeliveredPerS), r.pctOffered(),
			r.Latency.P50, r.Latency.P99, r.Latency.Max, r.ServerCPUPct, r.CPUPer1000, r.BytesPerDelivery, r.ConnsHeld, r.Sockets, r.Dups, r.Gaps)
	}

	w("\nMedians over the rounds:\n\n")
	w("| server | GOMAXPROCS | runs | delivered/s | %% of offered | p50 ms | p99 ms | max ms | server CPU | CPU ms per 1,000 deliveries |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range append([][]*benchRow{cfRows, floorRows}, hubs...) {
		if m := medianRow(g); m != nil {
			w("| %s | %s | %d | %s | %.1f%% | %.1f | %.1f | %.1f | %.0f%% | %.1f |\n", serverLabel(m), procsLabel(m.Procs), len(g),
				thousands(m.DeliveredPerS), m.pctOffered(), m.Latency.P50, m.Latency.P99, m.Latency.Max, m.ServerCPUPct, m.CPUPer1000)
		}
	}

	w("\n**hub ÷ Centrifugo** (of the medians; delivered: above 1 is better for the hub; latency and CPU: below 1 is better for the hub):\n\n")
	w("| hub GOMAXPROCS | delivered/s | %% of offered | p50 | p99 | max | CPU per 1,000 deliveries | CPU ÷ floor's |\n")
	w("|---|---|---|---|---|---|---|---|\n")
	for _, r := range ratios(rows) {
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", procsLabel(r.Procs), fmtRatio(r.Delivered), fmtRatio(r.PctOffered),
			fmtRatio(r.P50), fmtRatio(r.P99), fmtRatio(r.Max), fmtRatio(r.CPUPer1000), fmtRatio(r.CPUPerFloor))
	}
	if len(floorRows) > 0 {
		w("\n*CPU ÷ floor's*: the hub's median CPU per 1,000 deliveries ÷ the floor's, from the same rounds.\n")
	}
	msgs := float64(c.Runs) * 1000 / float64(max(c.TokenMS, 1))
	for _, r := range rows {
		if r.Target == "centrifugo" && r.PublishedPerS < 0.95*msgs {
			w("\nRound %d: Centrifugo accepted %s of the %s messages/s its publishers were to send (each publisher waits for its previous request, "+
				"and skips ahead rather than bursting when late, like the hub's simulated runs): the offered load was not reached.\n",
				r.Round, thousands(r.PublishedPerS), thousands(msgs))
		}
	}
	var problems []string
	for _, r := range rows {
		if r.Dups|r.Gaps|r.Disconnects|r.ErrorMsgs|r.PublishErrors != 0 || r.ConnectFailed > 0 || len(r.Errors) > 0 {
			problems = append(problems, fmt.Sprintf("round %d %s GOMAXPROCS %s: %d duplicates, %d gaps, %d failed to connect, %d dropped, %d error messages, %d failed publishes/run starts; %s",
				r.Round, serverLabel(r), procsLabel(r.Procs), r.Dups, r.Gaps, r.ConnectFailed, r.Disconnects, r.ErrorMsgs, r.PublishErrors, strings.Join(r.Errors, "; ")))
		}
	}
	if len(problems) == 0 {
		servers := "both servers"
		if len(floorRows) > 0 {
			servers = "every server"
		}
		w("\nCorrectness: every socket received every stream's messages in order, no duplicate and no gap, on %s; no socket dropped.\n", servers)
	} else {
		w("\nProblems:\n\n")
		for _, p := range problems {
			w("- %s\n", p)
		}
	}
}

// trimFloat prints v without trailing zeros (50, 33.3).
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}
