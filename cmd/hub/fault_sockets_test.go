//go:build fault

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// dialStalled opens a tab that says hello, watches everything, focuses
// sid and then never reads again; its receive buffer is 4 KiB, so the
// hub's writes to it stall at once.
func dialStalled(t *testing.T, ctx context.Context, p *hubProcess, sid string) *websocket.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ws, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/v1/ws", &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	for _, m := range []string{`{"type":"hello","client":"stalled"}`, `{"type":"watch","all":true}`,
		`{"type":"focus","session_id":"` + sid + `"}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// Tabs that stop reading do not grow the hub's memory with what they miss
// and do not slow the others: 40 tabs that never read (4 KiB receive
// buffers) watch everything and focus a session while a 12,000-event run
// streams into it (~3 MiB: the kernel's socket buffers take the first MiB
// or two of each); a reading tab gets every event once, in order; every
// stalled tab hits its queue bound (slow-consumer drops: live delivery to
// it stops, to be caught up from the journal), and the hub's anonymous
// memory stays within 96 MiB of what it was before.
func TestFault_StalledTabs(t *testing.T) {
	const stalled, n = 40, 12000
	p := startHub(t, fastDir(t))
	pid := p.cmd.Process.Pid
	warm := startHTTP(t, p, `{"tokens":500,"token_ms":0,"tools":0}`)
	waitTerminal(t, p, warm.RunID, 30*time.Second)
	time.Sleep(time.Second)
	before := procMemory(t, pid)

	sid := createSession(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range stalled {
		dialStalled(t, ctx, p, sid)
	}
	good := dialTab(t, p)
	good.c.Watch(good.ctx(), true)
	good.c.Focus(good.ctx(), sid, "")
	good.until(10*time.Second, "replayed", func() bool { return len(good.replayed) > 0 })

	var peak memory
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			m := procMemory(t, pid)
			peak.rss, peak.anon = max(peak.rss, m.rss), max(peak.anon, m.anon)
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	start := time.Now()
	run := startIn(t, p, sid, fmt.Sprintf(`{"tokens":%d,"token_ms":0,"tools":0}`, n))
	good.until(90*time.Second, "the run's terminal event on the reading tab", func() bool { return endsWith(good, run.RunID) })
	took := time.Since(start)
	close(stop)
	<-sampled
	checkDone(t, "the reading tab", good.run(run.RunID), n)
	drops := hubMetric(t, p, "runhub_slow_consumer_drops_total")
	t.Logf("%d stalled tabs, a %d-event run in %v: hub memory before %v, peak %v; slow-consumer drops %v; %v sockets still open",
		stalled, n+4, took.Round(time.Millisecond), before, peak, drops, hubMetric(t, p, "runhub_sockets_open"))
	if drops < stalled {
		t.Fatalf("%v slow-consumer drops: the %d stalled tabs did not all fill their queues", drops, stalled)
	}
	if grew := peak.anon - before.anon; grew > 96<<20 {
		t.Fatalf("the hub's anonymous memory grew by %.1f MiB with %d stalled tabs", float64(grew)/(1<<20), stalled)
	}
	healthy(t, p, 5*time.Second)
	noPanic(t, p)
}

// junk returns one frame of junk and whether it is binary; r picks which.
func junk(r *rand.Rand) ([]byte, websocket.MessageType) {
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	}
	valid := []string{
		`{"type":"hello","client":"junk"}`,
		`{"type":"watch","all":true}`,
		`{"type":"watch","sessions":["s_nope","s_` + strings.Repeat("x", 200) + `"]}`,
		`{"type":"focus","session_id":"s_nope","cursor":"r_nope:7"}`,
		`{"type":"focus","session_id":null}`,
		`{"type":"control","id":"c1","op":"cancel","run_id":"r_nope"}`,
		`{"type":"control","id":"c2","op":"approve","run_id":"r_x","approval_id":"a","choice":"yes"}`,
		`{"type":"control","id":"c3","op":"start","message":"x","metadata":{"sim":{"tokens":-1}}}`,
		`{"type":"ping","id":"p"}`,
	}
	switch k := r.IntN(100); {
	case k < 15: // random bytes, binary frame
		return rnd(1 + r.IntN(2048)), websocket.MessageBinary
	case k < 30: // random bytes as text (not even UTF-8)
		return rnd(1 + r.IntN(2048)), websocket.MessageText
	case k < 50: // a valid message with bytes flipped or cut short
		b := []byte(valid[r.IntN(len(valid))])
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] = byte(r.UintN(256))
		}
		return b[:1+r.IntN(len(b))], websocket.MessageText
	case k < 65: // valid JSON of the wrong shape
		shapes := []string{`[]`, `null`, `42`, `"hello"`, `{}`, `{"type":7}`, `{"type":"control","id":{"a":1}}`,
			`{"type":"hello","client":` + strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000) + `}`,
			`{"type":"watch","sessions":[` + strings.Repeat(`"s_a",`, 1500) + `"s_b"]}`,
			`{"type":"hello","client":"` + strings.Repeat("é", 300) + `"}`}
		return []byte(shapes[r.IntN(len(shapes))]), websocket.MessageText
	case k < 80: // a batch of junk lines
		var lines []string
		for range 2 + r.IntN(8) {
			lines = append(lines, valid[r.IntN(len(valid))], string(rnd(1+r.IntN(64))))
		}
		return []byte(strings.Join(lines, "\n")), websocket.MessageText
	case k < 81: // over the frame limit: close 1009
		return make([]byte, 1<<20+1+r.IntN(1<<20)), websocket.MessageText
	default: // well-formed messages about nothing that exists
		return []byte(valid[r.IntN(len(valid))]), websocket.MessageText
	}
}

// upgradeRaw does the WebSocket handshake by hand and returns the raw
// connection, ready for bytes that are not WebSocket frames.
func upgradeRaw(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /v1/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: runhub.v1\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		c.Close()
		return nil, fmt.Errorf("upgrade: %s", resp.Status)
	}
	return c, nil
}

// drainUntilClosed reads c until the peer closes it or within passes.
func drainUntilClosed(c net.Conn, within time.Duration) {
	c.SetReadDeadline(time.Now().Add(within))
	io.Copy(io.Discard, c)
	c.Close()
}

// 10,000 junk frames over WebSockets (random bytes in binary and text
// frames, mangled and misshapen messages, junk batches, frames over the
// size limit, messages about sessions and runs that do not exist, with and
// without hello) and 300 random byte streams (to the HTTP port, and after
// a WebSocket upgrade) leave the hub up and correct: a tab focused on a
// run throughout receives every event once, in order; a run started
// afterwards streams normally; its sockets and goroutines go back to
// where they were, and nothing panicked.
func TestFault_JunkFrames(t *testing.T) {
	const frames, workers = 10000, 50
	p := startHub(t, fastDir(t), "RUNHUB_PPROF=1")
	normalRun(t, p)
	baseG := hubMetric(t, p, "go_goroutines")
	baseHeap := liveHeap(t, p)
	before := procMemory(t, p.cmd.Process.Pid)

	watcher := dialTab(t, p)
	live := watcher.start(`{"tokens":2000,"token_ms":2,"tools":0}`)
	watcher.c.Focus(watcher.ctx(), live.SessionID, "")

	var sent, conns atomic.Int64
	var mu sync.Mutex
	closes := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for sent.Load() < frames {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				ws, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/v1/ws", &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
				if err != nil {
					cancel()
					t.Errorf("dial: %v", err)
					return
				}
				conns.Add(1)
				ws.SetReadLimit(16 << 20)
				readDone := make(chan error, 1)
				go func() {
					for {
						if _, _, err := ws.Read(ctx); err != nil {
							readDone <- err
							return
						}
					}
				}()
				if r.IntN(4) > 0 {
					ws.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","client":"junk"}`))
				}
				for range 1 + r.IntN(90) {
					if sent.Add(1) > frames {
						break
					}
					b, typ := junk(r)
					if ws.Write(ctx, typ, b) != nil {
						break // the hub closed it (flood, oversized frame, hello rule)
					}
				}
				ws.CloseNow()
				err = <-readDone
				cancel()
				code := strconv.Itoa(int(websocket.CloseStatus(err)))
				mu.Lock()
				closes[code]++
				mu.Unlock()
			}
		}()
	}
	// Random byte streams: 100 to the HTTP port, 200 after an upgrade.
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 11))
			b := make([]byte, 1+r.IntN(64<<10))
			for j := range b {
				b[j] = byte(r.UintN(256))
			}
			var c net.Conn
			var err error
			if i < 100 {
				c, err = net.DialTimeout("tcp", p.addr, 5*time.Second)
			} else {
				c, err = upgradeRaw(p.addr)
			}
			if err != nil {
				t.Errorf("byte stream %d: %v", i, err)
				return
			}
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write(b)
			drainUntilClosed(c, 3*time.Second)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d junk frames over %d sockets (close codes from the hub: %v) and 300 random byte streams", min(sent.Load(), frames), conns.Load(), closes)

	healthy(t, p, 5*time.Second)
	watcher.until(60*time.Second, "the watched run's terminal event", func() bool { return endsWith(watcher, live.RunID) })
	checkDone(t, "the tab focused during the junk", watcher.run(live.RunID), 2000)
	normalRun(t, p)
	g := settle(t, p, 1, baseG, 20)
	after := procMemory(t, p.cmd.Process.Pid)
	heap := liveHeap(t, p)
	t.Logf("goroutines %v before, %v after; live heap %.1f MiB before, %.1f MiB after; hub memory before %v, after %v",
		baseG, g, baseHeap/(1<<20), heap/(1<<20), before, after)
	bounded(t, "the junk", baseHeap, heap, before, after)
	noPanic(t, p)
}

// churnSocket is one socket of a burst: it connects, maybe says hello and
// watches or focuses, and is dropped by drop.
type churnSocket struct {
	ws  *websocket.Conn
	raw net.Conn
}

func (s churnSocket) drop(abrupt bool) {
	switch {
	case s.raw != nil:
		s.raw.Close()
	case abrupt:
		s.ws.CloseNow() // gone without a close frame
	default:
		s.ws.Close(websocket.StatusGoingAway, "bye") // a tab closed
	}
}

// 4 bursts of 1,000 sockets each connecting at once (most say hello, a
// third watch everything, a third focus a live run, some never say hello,
// some hang up halfway through the upgrade) and all dropping together
// (half without a close frame): /healthz answers during every burst, a
// tab focused on a run throughout receives every event in order, and
// afterwards the hub's sockets and goroutines are back where they were
// and its memory has not grown by more than 128 MiB.
func TestFault_SocketChurn(t *testing.T) {
	const bursts, perBurst = 4, 1000
	p := startHub(t, fastDir(t), "RUNHUB_PPROF=1")
	normalRun(t, p)
	time.Sleep(time.Second)
	baseG := hubMetric(t, p, "go_goroutines")
	baseHeap := liveHeap(t, p)
	before := procMemory(t, p.cmd.Process.Pid)

	watcher := dialTab(t, p)
	live := watcher.start(`{"tokens":3000,"token_ms":3,"tools":0}`)
	watcher.c.Focus(watcher.ctx(), live.SessionID, "")
	// The watcher reads throughout, so the run's events never pile up.
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for !endsWith(watcher, live.RunID) {
			m, err := watcher.c.Next(ctx)
			if err != nil {
				watcher.closed = err
				return
			}
			watcher.record(m)
		}
	}()

	var peak memory
	var slowest time.Duration
	for b := range bursts {
		sockets := make([]churnSocket, perBurst)
		var wg sync.WaitGroup
		var failed atomic.Int64
		start := time.Now()
		for i := range perBurst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				switch i % 10 {
				case 0: // hangs up halfway through the upgrade
					c, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
					if err != nil {
						failed.Add(1)
						return
					}
					fmt.Fprintf(c, "GET /v1/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n", p.addr)
					sockets[i] = churnSocket{raw: c}
					return
				}
				ws, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/v1/ws", &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
				if err != nil {
					failed.Add(1)
					return
				}
				sockets[i] = churnSocket{ws: ws}
				if i%10 == 1 {
					return // never says hello
				}
				msgs := []string{`{"type":"hello","client":"churn"}`}
				switch i % 3 {
				case 0:
					msgs = append(msgs, `{"type":"watch","all":true}`)
				case 1:
					msgs = append(msgs, `{"type":"focus","session_id":"`+live.SessionID+`"}`)
				}
				for _, m := range msgs {
					if ws.Write(ctx, websocket.MessageText, []byte(m)) != nil {
						failed.Add(1)
						return
					}
				}
			}()
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("burst %d: %d of %d sockets failed to connect", b, f, perBurst)
		}
		slowest = max(slowest, healthy(t, p, 5*time.Second))
		m := procMemory(t, p.cmd.Process.Pid)
		peak.rss, peak.anon = max(peak.rss, m.rss), max(peak.anon, m.anon)
		open := hubMetric(t, p, "runhub_sockets_open")
		var dwg sync.WaitGroup
		for i, s := range sockets {
			dwg.Add(1)
			go func() {
				defer dwg.Done()
				s.drop(i%2 == 0)
			}()
		}
		dwg.Wait()
		t.Logf("burst %d: %d sockets up in %v, %v open at the hub, %v", b, perBurst, time.Since(start).Round(time.Millisecond), open, m)
		slowest = max(slowest, healthy(t, p, 5*time.Second))
	}
	select {
	case <-watched:
	case <-time.After(3 * time.Minute):
		t.Fatal("the watcher did not finish")
	}
	if watcher.closed != nil {
		t.Fatalf("the watching tab closed: %v", watcher.closed)
	}
	checkDone(t, "the tab focused during the bursts", watcher.run(live.RunID), 3000)
	g := settle(t, p, 1, baseG, 20)
	after := procMemory(t, p.cmd.Process.Pid)
	heap := liveHeap(t, p)
	t.Logf("goroutines %v before, %v after; live heap %.1f MiB before, %.1f MiB after; hub memory before %v, peak %v, after %v; slowest /healthz %v",
		baseG, g, baseHeap/(1<<20), heap/(1<<20), before, peak, after, slowest.Round(time.Millisecond))
	bounded(t, fmt.Sprintf("%d bursts", bursts), baseHeap, heap, before, after)
	normalRun(t, p)
	noPanic(t, p)
}
