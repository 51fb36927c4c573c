package main

import (
	"context"
	"fmt"
	"time"
)

// replayResult is the -replay phase: focusing a session whose latest run
// holds Events events, on an otherwise idle hub.
type replayResult struct {
	Tokens   int     `json:"tokens"`
	Events   int     `json:"events"`    // events replayed per focus (from the replayed marker)
	Fill     float64 `json:"fill_s"`    // time to journal the run
	Focuses  int     `json:"focuses"`   // focuses timed
	Time     summary `json:"time"`      // focus sent → replayed marker received
	Bytes    int64   `json:"bytes"`     // bytes received per focus
	HubCPU   float64 `json:"hub_cpu_s"` // hub CPU per focus
	Dups     uint64  `json:"dups"`
	Gaps     uint64  `json:"gaps"`
	Complete bool    `json:"complete"` // every focus delivered seq 1..last with the terminal event
}

// replayTest journals one run of cfg.Replay tokens (token_ms 0, no tools),
// waits for its end, then focuses it ReplayFocuses times on one socket,
// timing each from the focus message to the replayed marker.
func (g *gen) replayTest(ctx context.Context) (*replayResult, error) {
	n := g.cfg.Replay
	a := g.apis[0]
	sid, err := a.createSession(ctx, "replay")
	if err != nil {
		return nil, err
	}
	g.logf("replay: journaling a run of %d tokens", n)
	t0 := time.Now()
	rid, err := a.startRun(ctx, sid, simScript{Tokens: n, TokenMS: 0, Tools: 0})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = a.waitRun(wctx, rid)
	cancel()
	if err != nil {
		return nil, err
	}
	res := &replayResult{Tokens: n, Fill: time.Since(t0).Seconds(), Focuses: g.cfg.ReplayFocuses, Complete: true}
	s := &sock{g: g, url: g.wsURL(0), focusSet: nil, sh: &shard{}}
	if _, err := s.dial(ctx, g.hc); err != nil {
		return nil, err
	}
	defer s.ws.CloseNow()
	var h hist
	var ev eventHead
	var o other
	p0 := g.sample()
	var bytes int64
	for i := 0; i < g.cfg.ReplayFocuses; i++ {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := s.focus(fctx, sid); err != nil {
			cancel()
			return nil, err
		}
		var last uint64
		terminal := false
		events := 0
		for done := false; !done; {
			buf, err := s.read(nil)
			if err != nil {
				cancel()
				return nil, fmt.Errorf("focus %d: %w", i, err)
			}
			bytes += int64(len(buf))
			for rest := buf; len(rest) > 0; {
				line := rest
				if j := indexNL(rest); j >= 0 {
					line, rest = rest[:j], rest[j+1:]
				} else {
					rest = nil
				}
				switch classify(line, &ev, &o) {
				case kindEvent:
					s.check.event(&ev)
					events += int(ev.covered())
					last, terminal = ev.Seq, ev.Terminal
				case kindReplayed:
					if o.SessionID == sid {
						h.record(time.Since(s.focusAt).Microseconds())
						res.Events = o.Count
						done = true
					}
				case kindError:
					g.noteErr(fmt.Sprintf("replay: hub error %s: %s", o.Code, o.Message))
				}
			}
		}
		cancel()
		if !terminal || uint64(events) != last {
			res.Complete = false
		}
		// Unfocus so the next focus starts from scratch.
		if err := s.send(ctx, map[string]any{"type": "focus", "session_id": nil}); err != nil {
			return nil, err
		}
	}
	p1 := g.sample()
	res.Time = h.summarize()
	res.Bytes = bytes / int64(g.cfg.ReplayFocuses)
	if p0.ok && p1.ok {
		res.HubCPU = (p1.CPU - p0.CPU) / float64(g.cfg.ReplayFocuses)
	}
	res.Dups, res.Gaps = s.check.dups, s.check.gaps
	g.c.dups.Add(res.Dups)
	g.c.gaps.Add(res.Gaps)
	g.logf("replay: %d events per focus, p50 %.1f ms, max %.1f ms", res.Events, res.Time.P50, res.Time.Max)
	return res, nil
}
