package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// cfSock is one subscriber socket.
type cfSock struct {
	g       *gen
	ws      *websocket.Conn
	tab     int
	url     string
	channel string
	more    []string // channels subscribed after channel (-centrifugo-idle: the rest of a tab's watch)
	token   string
	sh      *shard
	check   *seqCheck // touched by the socket's reader only
	open    atomic.Bool
}

// dial connects, sends the connect command and waits for its reply (the
// connect time), then subscribes to the socket's channel.
func (s *cfSock) dial(ctx context.Context, hc *http.Client) (time.Duration, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return 0, err
	}
	ws.SetReadLimit(64 << 20)
	s.ws = ws
	steps := []struct {
		cmd []byte
		id  uint32
	}{{cfConnectCmd(1, s.token, "runhub-loadtest"), 1}, {cfSubscribeCmd(2, s.channel), 2}}
	for i, ch := range s.more {
		id := uint32(3 + i)
		steps = append(steps, struct {
			cmd []byte
			id  uint32
		}{cfSubscribeCmd(id, ch), id})
	}
	var took time.Duration
	for _, st := range steps {
		if err := ws.Write(ctx, websocket.MessageText, st.cmd); err != nil {
			ws.CloseNow()
			return 0, err
		}
		if err := s.awaitReply(ctx, st.id); err != nil {
			ws.CloseNow()
			return 0, err
		}
		if st.id == 1 {
			took = time.Since(t0)
		}
	}
	s.open.Store(true)
	return took, nil
}

// awaitReply reads until the reply to command id; other lines read on the
// way are handled as the reader would.
func (s *cfSock) awaitReply(ctx context.Context, id uint32) error {
	var l cfLine
	for {
		_, data, err := s.ws.Read(ctx)
		if err != nil {
			return err
		}
		for rest := data; len(rest) > 0; {
			line := rest
			if i := indexNL(rest); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if cfClassify(line, &l) == cfReply && l.ID == id {
				if l.ErrCode != 0 || l.ErrMsg != "" {
					return fmt.Errorf("centrifugo: command %d: error %d %s", id, l.ErrCode, l.ErrMsg)
				}
				s.handle(rest, time.Now().UnixMicro(), nil)
				return nil
			}
			s.handle(line, time.Now().UnixMicro(), nil)
		}
	}
}

// readLoop reads messages until the socket ends.
func (s *cfSock) readLoop() {
	buf := make([]byte, 0, 4096)
	lats := make([]int64, 0, 64)
	c := &s.g.c
	for {
		_, r, err := s.ws.Reader(context.Background())
		if err == nil {
			buf, err = readAllInto(r, buf[:0])
		}
		if err != nil {
			if s.open.Swap(false) && !s.g.closing.Load() {
				c.disconnects.Add(1)
				s.g.noteErr(fmt.Sprintf("socket closed: %v", err))
			}
			return
		}
		c.frames.Add(1)
		c.bytes.Add(uint64(len(buf)))
		lats = s.handle(buf, time.Now().UnixMicro(), lats[:0])
		if len(lats) > 0 {
			measuring := s.g.measuring.Load()
			s.sh.mu.Lock()
			for _, l := range lats {
				s.sh.latWin.record(l)
				if measuring {
					s.sh.lat.record(l)
				}
			}
			s.sh.mu.Unlock()
		}
	}
}

// handle processes the lines of one message: answers pings, checks and
// counts publications (appending their latencies to lats), notes errors.
func (s *cfSock) handle(msg []byte, now int64, lats []int64) []int64 {
	c := &s.g.c
	ck := s.check
	d0, g0 := ck.dups, ck.gaps
	var l cfLine
	var ev eventHead
	var pubs, others uint64
	for rest := msg; len(rest) > 0; {
		line := rest
		if i := indexNL(rest); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(line) == 0 {
			continue
		}
		switch cfClassify(line, &l) {
		case cfPing:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.ws.Write(ctx, websocket.MessageText, cfPingLine); err != nil && !s.g.closing.Load() {
				s.g.noteErr("pong: " + err.Error())
			}
			cancel()
		case cfPub:
			if !cfParseData(l.Data, &ev) {
				others++
				s.g.noteErr(fmt.Sprintf("publication not understood: %.200s", line))
				continue
			}
			ck.event(&ev)
			pubs++
			lats = append(lats, now-ev.CreatedUS)
			if s.g.cfg.FullDecode {
				decodeWhole(line)
			}
		case cfDisconnect:
			c.errorMsgs.Add(1)
			s.g.noteErr(fmt.Sprintf("centrifugo push on %s: %d %s", l.Channel, l.ErrCode, l.ErrMsg))
		case cfReply:
			if l.ErrCode == 0 && l.ErrMsg == "" {
				others++
				continue
			}
			c.errorMsgs.Add(1)
			s.g.noteErr(fmt.Sprintf("centrifugo reply %d: %d %s", l.ID, l.ErrCode, l.ErrMsg))
		default:
			others++
		}
	}
	c.liveEvents.Add(pubs)
	c.others.Add(others)
	if dd, dg := ck.dups-d0, ck.gaps-g0; dd|dg != 0 {
		c.dups.Add(dd)
		c.gaps.Add(dg)
		s.g.noteErr(fmt.Sprintf("socket %d: %d duplicates, %d gaps on %s", s.tab, dd, dg, s.channel))
	}
	return lats
}

// cfParseData reads the envelope fields of a publication's data.
func cfParseData(data []byte, ev *eventHead) bool {
	if parseEventFast(data, ev) {
		return true
	}
	var m struct {
		RunID     string      `json:"run_id"`
		SessionID string      `json:"session_id"`
		Seq       uint64      `json:"seq"`
		CreatedAt json.Number `json:"created_at"`
		Terminal  bool        `json:"terminal"`
	}
	if json.Unmarshal(data, &m) != nil || m.RunID == "" {
		return false
	}
	us, ok := parseMicros([]byte(m.CreatedAt.String()))
	if !ok {
		return false
	}
	*ev = eventHead{RunID: m.RunID, SessionID: m.SessionID, Seq: m.Seq, CreatedUS: us, Terminal: m.Terminal}
	return true
}

// cfProgress prints one line per second while a Centrifugo run lasts.
func cfProgress(ctx context.Context, g *gen, p *cfPublisher, socks []*cfSock) {
	if g.cfg.Quiet {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev, prevCPU, prevPub := g.c.snap(), g.sample(), p.published.Load()
	t0 := time.Now()
	var win hist
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur, cpu, pub := g.c.snap(), g.sample(), p.published.Load()
		win.reset()
		for i := range g.shards {
			sh := &g.shards[i]
			sh.mu.Lock()
			win.merge(&sh.latWin)
			sh.latWin.reset()
			sh.mu.Unlock()
		}
		open := 0
		for _, s := range socks {
			if s.open.Load() {
				open++
			}
		}
		dt := cur.at.Sub(prev.at).Seconds()
		phase := map[bool]string{true: "measure", false: "connect/warmup"}[g.measuring.Load()]
		srv := ""
		if cpu.ok && prevCPU.ok {
			srv = fmt.Sprintf(" cpu=%.0f%% rss=%s", 100*(cpu.CPU-prevCPU.CPU)/cpu.At.Sub(prevCPU.At).Seconds(), mib(cpu.RSS))
		}
		fmt.Fprintf(os.Stderr, "%5.0fs centrifugo %-14s conns=%d pub/s=%.0f ev/s=%.0f p50=%.1fms p99=%.1fms dup=%d gap=%d%s\n",
			time.Since(t0).Seconds(), phase, open, float64(pub-prevPub)/dt, float64(cur.liveEvents-prev.liveEvents)/dt,
			float64(win.quantile(0.5))/1000, float64(win.quantile(0.99))/1000, cur.dups, cur.gaps, srv)
		prev, prevCPU, prevPub = cur, cpu, pub
	}
}
