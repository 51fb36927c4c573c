package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// counters are the generator's running totals (atomics, added per frame).
type counters struct {
	frames, bytes          atomic.Uint64
	liveEvents, replayEvts atomic.Uint64
	statuses, others       atomic.Uint64
	replayedMarks          atomic.Uint64
	staleEvents            atomic.Uint64 // events of a session no longer focused, in flight across a refocus
	dups, gaps, reseen     atomic.Uint64
	errorMsgs              atomic.Uint64
	disconnects            atomic.Uint64
	focusSwitches          atomic.Uint64
}

type snapshot struct {
	frames, bytes, liveEvents, replayEvts, statuses, others, replayedMarks, staleEvents,
	dups, gaps, reseen, errorMsgs, disconnects, focusSwitches uint64
	at time.Time
}

func (c *counters) snap() snapshot {
	return snapshot{c.frames.Load(), c.bytes.Load(), c.liveEvents.Load(), c.replayEvts.Load(), c.statuses.Load(),
		c.others.Load(), c.replayedMarks.Load(), c.staleEvents.Load(), c.dups.Load(), c.gaps.Load(), c.reseen.Load(),
		c.errorMsgs.Load(), c.disconnects.Load(), c.focusSwitches.Load(), time.Now()}
}

// shard holds histograms that a group of sockets records into; a socket
// records a whole frame's samples under one lock.
type shard struct {
	mu      sync.Mutex
	latWin  hist // live event latency this second (progress line)
	lat     hist // live event latency while measuring
	replay  hist // focus sent → replayed marker, while measuring
	replayN hist // events replayed per focus (count, not µs)
}

const nShards = 64

// sock is one tab socket.
type sock struct {
	g       *gen
	ws      *websocket.Conn
	tab     int
	url     string
	watched []string // sessions watched by id (empty on focus-all extras)
	sh      *shard

	mu        sync.Mutex // guards the focus state below (reader vs switcher)
	focusIdx  int        // index in focusSet
	focusSet  []string   // sessions this socket cycles its focus through
	focusSID  string
	focusAt   time.Time
	replaying bool
	check     *seqCheck

	open atomic.Bool
}

var errUnexpected = errors.New("unexpected message")

// dial connects, says hello, waits for welcome, watches and focuses.
func (s *sock) dial(ctx context.Context, hc *http.Client) (time.Duration, error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.url, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}, HTTPClient: hc})
	if err != nil {
		return 0, err
	}
	ws.SetReadLimit(64 << 20)
	s.ws = ws
	hello := protocol.Hello{Type: protocol.MsgHello, Client: "runhub-loadtest"}
	if s.g.cfg.CompactReplay {
		hello.Capabilities = []string{protocol.CapCompactReplay}
	}
	if err := s.send(ctx, hello); err != nil {
		ws.CloseNow()
		return 0, err
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return 0, err
	}
	var ev eventHead
	var o other
	if classify(firstLine(data), &ev, &o) != kindWelcome {
		ws.CloseNow()
		return 0, fmt.Errorf("%w: want welcome, got %.200s", errUnexpected, data)
	}
	took := time.Since(t0)
	if len(s.watched) > 0 {
		if err := s.send(ctx, protocol.Watch{Type: protocol.MsgWatch, Sessions: s.watched}); err != nil {
			ws.CloseNow()
			return 0, err
		}
	}
	s.open.Store(true)
	if len(s.focusSet) > 0 {
		if err := s.focus(ctx, s.focusSet[0]); err != nil {
			ws.CloseNow()
			s.open.Store(false)
			return 0, err
		}
	}
	return took, nil
}

func firstLine(b []byte) []byte {
	for i, c := range b {
		if c == '\n' {
			return b[:i]
		}
	}
	return b
}

func (s *sock) send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.ws.Write(ctx, websocket.MessageText, b)
}

// focus starts a new epoch on sid and sends the focus message (no cursor:
// the hub replays the session's latest run from seq 1).
func (s *sock) focus(ctx context.Context, sid string) error {
	s.mu.Lock()
	s.focusSID, s.focusAt, s.replaying = sid, time.Now(), true
	if s.check == nil {
		s.check = newSeqCheck()
	}
	s.check.refocus("", 0)
	s.mu.Unlock()
	return s.send(ctx, protocol.Focus{Type: protocol.MsgFocus, SessionID: &sid})
}

// switchFocus moves the focus to the next session of the socket's set.
func (s *sock) switchFocus(ctx context.Context) error {
	if len(s.focusSet) < 2 || !s.open.Load() {
		return nil
	}
	s.mu.Lock()
	s.focusIdx = (s.focusIdx + 1) % len(s.focusSet)
	sid := s.focusSet[s.focusIdx]
	s.mu.Unlock()
	s.g.c.focusSwitches.Add(1)
	return s.focus(ctx, sid)
}

// readLoop reads frames until the socket ends.
func (s *sock) readLoop() {
	buf := make([]byte, 0, 4096)
	lats := make([]int64, 0, 64)
	c := &s.g.c
	var ev eventHead
	var o other
	for {
		var err error
		buf, err = s.read(buf[:0])
		if err != nil {
			if s.open.Swap(false) && !s.g.closing.Load() {
				c.disconnects.Add(1)
				s.g.noteErr(fmt.Sprintf("socket closed: %v", err))
			}
			return
		}
		now := time.Now().UnixMicro()
		c.frames.Add(1)
		c.bytes.Add(uint64(len(buf)))
		lats = lats[:0]
		var live, replay, statuses, others, stale, marks, errs uint64
		var replayUS, replayCount int64 = -1, 0
		s.mu.Lock()
		ck := s.check
		d0, g0, r0 := ck.dups, ck.gaps, ck.reseen
		for rest := buf; len(rest) > 0; {
			line := rest
			if i := indexNL(rest); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if len(line) == 0 {
				continue
			}
			switch classify(line, &ev, &o) {
			case kindEvent:
				if ev.SessionID != s.focusSID {
					stale++
					continue
				}
				ck.event(&ev)
				if s.replaying {
					replay += ev.covered() // events, not compacted records
				} else {
					live += ev.covered()
					lats = append(lats, now-ev.CreatedUS)
					if s.g.cfg.FullDecode {
						decodeWhole(line)
					}
				}
			case kindStatus:
				statuses++
			case kindReplayed:
				if o.SessionID == s.focusSID && s.replaying {
					s.replaying = false
					marks++
					replayUS = now - s.focusAt.UnixMicro()
					replayCount = int64(o.Count)
				} else {
					others++
				}
			case kindError:
				errs++
				s.g.noteErr(fmt.Sprintf("hub error %s: %s (ref %s)", o.Code, o.Message, o.Ref))
			default:
				others++
			}
		}
		dd, dg, dr := ck.dups-d0, ck.gaps-g0, ck.reseen-r0
		s.mu.Unlock()
		c.liveEvents.Add(live)
		c.replayEvts.Add(replay)
		c.statuses.Add(statuses)
		c.others.Add(others)
		c.staleEvents.Add(stale)
		c.replayedMarks.Add(marks)
		c.errorMsgs.Add(errs)
		if dd|dg|dr != 0 {
			c.dups.Add(dd)
			c.gaps.Add(dg)
			c.reseen.Add(dr)
			if dd|dg != 0 {
				s.g.noteErr(fmt.Sprintf("tab %d: %d duplicates, %d gaps on focus %s", s.tab, dd, dg, s.focusSID))
			}
		}
		if len(lats) > 0 || replayUS >= 0 {
			measuring := s.g.measuring.Load()
			s.sh.mu.Lock()
			for _, l := range lats {
				s.sh.latWin.record(l)
				if measuring {
					s.sh.lat.record(l)
				}
			}
			if replayUS >= 0 && measuring {
				s.sh.replay.record(replayUS)
				s.sh.replayN.record(replayCount)
			}
			s.sh.mu.Unlock()
		}
	}
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// read reads one message into buf (reused across frames).
func (s *sock) read(buf []byte) ([]byte, error) {
	_, r, err := s.ws.Reader(context.Background())
	if err != nil {
		return buf, err
	}
	return readAllInto(r, buf)
}

// readAllInto appends what r holds to buf, growing it as needed.
func readAllInto(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
