//go:build fault

package main

// The fault suite (make fault; docs/security.md "Fault tests"): hub
// processes under stalled tabs, junk, socket churn, Redis outages and a
// full or read-only data directory. Each test says what it proves; the
// figures they log (RSS, goroutines) are quoted in docs/security.md.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/coder/websocket"
	goredis "github.com/redis/go-redis/v9"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// A hub child started with RUNHUB_TEST_FSIZE=<bytes> runs under that
// RLIMIT_FSIZE (SIGXFSZ ignored, so a write past it fails with EFBIG):
// the disk-full test's stand-in for a full filesystem where tmpfs cannot be
// mounted.
func init() {
	if os.Getenv("RUNHUB_TEST_AS_HUB") != "1" {
		return
	}
	if v := os.Getenv("RUNHUB_TEST_FSIZE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			panic(err)
		}
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: ^uint64(0)}); err != nil {
			panic(err)
		}
	}
}

// fastDir is a data directory for tests about delivery rather than
// durability: on /dev/shm (a tmpfs: fsync costs nothing, so a long run
// takes seconds, not a minute under the race detector) when there is one.
func fastDir(t *testing.T) string {
	t.Helper()
	if d, err := os.MkdirTemp("/dev/shm", "runhub-fault"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

// memory is a process's resident memory from /proc/<pid>/status, in bytes.
type memory struct{ rss, anon int64 }

func procMemory(t testing.TB, pid int) memory {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		}
	}
	return m
}

func (m memory) String() string {
	return fmt.Sprintf("RSS %.1f MiB (anonymous %.1f MiB)", float64(m.rss)/(1<<20), float64(m.anon)/(1<<20))
}

// hubMetric scrapes one series of the hub's /metrics (-1 when absent).
func hubMetric(t testing.TB, p *hubProcess, series string) float64 {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return seriesValue(string(b), series)
}

// endsWith reports whether the last event b received is runID's terminal
// one (tab.terminal copies every event of the run: quadratic over a long
// run).
func endsWith(b *tab, runID string) bool {
	n := len(b.events)
	return n > 0 && b.events[n-1].RunID == runID && b.events[n-1].Terminal
}

// raceEnabled is set when the suite runs under the race detector (its own
// memory is in the hub's RSS and grows with every goroutine it has seen).
var raceEnabled bool

// liveHeap is the hub's heap right after a collection (the hub serves
// pprof: RUNHUB_PPROF=1).
func liveHeap(t testing.TB, p *hubProcess) float64 {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(p.URL() + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatalf("GET /debug/pprof/heap: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /debug/pprof/heap: %d (start the hub with RUNHUB_PPROF=1)", resp.StatusCode)
	}
	return hubMetric(t, p, "go_memstats_heap_alloc_bytes")
}

// bounded fails the test if the hub kept what a fault brought: its live
// heap more than 16 MiB over what it was, or (without the race detector,
// whose own memory grows with every goroutine it has seen) its anonymous
// resident memory more than 64 MiB over.
func bounded(t *testing.T, what string, heapBefore, heapAfter float64, before, after memory) {
	t.Helper()
	if heapAfter-heapBefore > 16<<20 {
		t.Fatalf("after %s the hub's live heap is %.1f MiB, %.1f MiB before", what, heapAfter/(1<<20), heapBefore/(1<<20))
	}
	if grew := after.anon - before.anon; grew > 64<<20 && !raceEnabled {
		t.Fatalf("after %s the hub's anonymous memory grew by %.1f MiB", what, float64(grew)/(1<<20))
	}
}

// healthy fails the test unless the hub process is running and /healthz
// answers 200 within within; it returns how long the answer took.
func healthy(t testing.TB, p *hubProcess, within time.Duration) time.Duration {
	t.Helper()
	if p.cmd.ProcessState != nil {
		t.Fatalf("the hub exited: %v\n%s", p.cmd.ProcessState, tail(p.out.String(), 4000))
	}
	c := http.Client{Timeout: within}
	start := time.Now()
	resp, err := c.Get(p.URL() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	return time.Since(start)
}

// noPanic fails the test if the hub's output shows a panic or a data race.
func noPanic(t testing.TB, p *hubProcess) {
	t.Helper()
	out := p.out.String()
	for _, bad := range []string{"panic:", "DATA RACE", "fatal error:"} {
		if strings.Contains(out, bad) {
			t.Fatalf("the hub's output has %q:\n%s", bad, tail(out, 8000))
		}
	}
}

func createSession(t testing.TB, p *hubProcess) string {
	t.Helper()
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "fault"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	return sess.SessionID
}

func startIn(t testing.TB, p *hubProcess, sid, script string) protocol.RunStartResult {
	t.Helper()
	var run protocol.RunStartResult
	body := map[string]any{"message": "fault", "metadata": map[string]any{"sim": jsonRaw(script)}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sid+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return run
}

// normalRun proves a hub still works: a fresh tab starts a sim run,
// focuses it and receives every event, in order, once.
func normalRun(t *testing.T, p *hubProcess) {
	t.Helper()
	ta := dialTab(t, p)
	res := ta.start(`{"tokens":50,"token_ms":1,"tools":1}`)
	ta.c.Focus(ta.ctx(), res.SessionID, "")
	ta.until(30*time.Second, "the run's terminal event", func() bool { return ta.terminal(res.RunID) })
	checkDone(t, "a normal run", ta.run(res.RunID), 50)
	sameEvents(t, "the tab vs. the journal", ta.run(res.RunID), allEvents(t, p.URL(), res.RunID))
	ta.c.Close()
}

// settle waits until the hub has at most sockets open and its goroutines
// are back within slack of base; it returns the goroutine count.
func settle(t *testing.T, p *hubProcess, sockets int, base, slack float64) float64 {
	t.Helper()
	var g float64
	waitFor(t, 30*time.Second, fmt.Sprintf("%d sockets open and goroutines within %v of %v", sockets, slack, base), func() bool {
		g = hubMetric(t, p, "go_goroutines")
		return hubMetric(t, p, "runhub_sockets_open") <= float64(sockets) && g <= base+slack
	})
	return g
}

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

// Redis unavailable at start: hub serve (runners mode) and hub runner both
// wait for it, saying so in their logs, while the hub's /healthz is 200,
// its /readyz 503 "redis unreachable" and its API 503 unavailable; once
// Redis is up they start, and a run executes in the runner and streams to
// a tab. A process stopped while it waits exits cleanly; a Redis that
// refuses the credentials ends the process at once with that error.
func TestFault_RedisDownAtStart(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	rs.Stop()
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s", "RUNHUB_RUNTIME=runners"}
	p := startHub(t, t.TempDir(), env...)
	r := startRunner(t, env...)
	waitFor(t, 10*time.Second, "the hub and the runner to log the outage", func() bool {
		return strings.Contains(p.out.String(), "redis unreachable at start; retrying") &&
			strings.Contains(r.out.String(), "redis unreachable at start; retrying")
	})
	code, body := httpBody(t, "GET", p.URL()+"/readyz", "")
	if code != 503 || !strings.Contains(string(body), "redis unreachable") {
		t.Fatalf("/readyz while Redis is down: %d %s", code, body)
	}
	code, body = httpBody(t, "POST", p.URL()+"/v1/sessions", `{"title":"x"}`)
	if code != 503 || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("the API while Redis is down: %d %s", code, body)
	}
	time.Sleep(time.Second) // a few more attempts
	if p.cmd.ProcessState != nil || r.cmd.ProcessState != nil {
		t.Fatal("a process exited while Redis was down")
	}

	rs.Restart(t)
	waitFor(t, 20*time.Second, "/readyz 200 once Redis is up", func() bool { return readyz(p) == 200 })
	waitFor(t, 20*time.Second, "the runner to start", func() bool { return strings.Contains(r.out.String(), "runhub runner started") })
	normalRun(t, p)

	// Stopped while waiting: a clean exit.
	rs.Stop()
	q := startHub(t, t.TempDir(), env...)
	waitFor(t, 10*time.Second, "the second hub to wait", func() bool { return strings.Contains(q.out.String(), "redis unreachable at start") })
	if err := q.term(10 * time.Second); err != nil {
		t.Fatalf("a hub stopped while waiting for Redis: %v\n%s", err, q.out.String())
	}

	// Refused: exit at once with the reason.
	// (Redis answers AUTH of a user it does not know with WRONGPASS.)
	rs.Restart(t)
	u := strings.Replace(rs.URL(), "unix://", "unix://nobody:wrong-password@", 1)
	cmd := hubCmd([]string{"serve"}, "RUNHUB_REDIS_URL="+u, "RUNHUB_ADDR="+freeAddr(t), "RUNHUB_DATA="+t.TempDir())
	done := make(chan []byte, 1)
	start := time.Now()
	go func() { out, _ := cmd.CombinedOutput(); done <- out }()
	select {
	case out := <-done:
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "refused the connection") ||
			strings.Contains(string(out), "wrong-password") {
			t.Fatalf("hub serve with a wrong Redis password: exit %d after %v:\n%s", cmd.ProcessState.ExitCode(), time.Since(start), out)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("hub serve with a wrong Redis password did not exit")
	}
}

// Redis killed (SIGKILL, AOF with fsync always) in the middle of a run
// and started again 6 s later: no journaled event is lost or duplicated,
// the run completes, the focused tab gets every event once, and /readyz
// is 503 while Redis is away.
func TestFault_RedisKilledMidRun(t *testing.T) {
	redisOutageMidRun(t, (*redistest.Server).Kill)
}

// Redis refuses writes in the middle of a run (maxmemory reached under
// noeviction: every write answers -OOM, as Redis answers -MISCONF when it
// cannot persist) on a hub with the Redis journal executing its runs
// in-process. The failures are logged, /readyz says 503 "journal not
// writable", the hub stays up and what was journaled stays readable. Held
// past the append retry (the lease TTL), the executor gives the run up and
// keeps trying its terminal event. Once Redis takes writes again /readyz
// is 200, the run ends with exactly one
// terminal error (no Redis text in it) that the focused tab gets as the
// journal has it, nothing journaled is lost or duplicated, and a new run
// completes.
func TestFault_RedisRefusesWrites(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})
	rdb := goredis.NewClient(&goredis.Options{Network: "unix", Addr: rs.Socket(), ClientName: "test"})
	defer rdb.Close()
	ctx := context.Background()
	p := startHub(t, t.TempDir(), "RUNHUB_REDIS_URL="+rs.URL(), "RUNHUB_RUNTIME=inprocess", "RUNHUB_LEASE_TTL=3s")
	before, beforeEvents, ta, big := runThenStream(t, p, `{"tokens":200000,"token_ms":2,"tools":0}`)
	ta.until(20*time.Second, "100 tokens", func() bool { return count(ta.run(big.RunID), protocol.EventTokenDelta) >= 100 })
	// One byte: whatever Redis holds already is over it, so every write is
	// refused from now on; reads go on.
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the hub to log Redis refusing a write", func() bool { return strings.Contains(p.out.String(), "OOM") })
	waitFor(t, 10*time.Second, "/readyz 503", func() bool { return readyz(p) == 503 })
	if code, body := httpBody(t, "GET", p.URL()+"/readyz", ""); code != 503 || !strings.Contains(string(body), "journal not writable") {
		t.Fatalf("/readyz while Redis refuses writes: %d %s", code, body)
	}
	healthy(t, p, 5*time.Second)
	sameEvents(t, "the earlier run while Redis refuses writes", allEvents(t, p.URL(), before.RunID), beforeEvents)
	if code, body := httpBody(t, "POST", p.URL()+"/v1/sessions", `{"title":"x"}`); code < 500 || strings.Contains(string(body), "OOM") {
		t.Fatalf("creating a session while Redis refuses writes: %d %s", code, body)
	}
	st := runStatus(t, p, big.RunID)
	if st.Terminal {
		t.Fatalf("the run ended while Redis refused writes: %+v", st)
	}
	t.Logf("Redis refused writes from seq %d; the run is %s", st.LastSeq, st.Status)
	// Appends are retried for the lease TTL (3 s): a shorter refusal is
	// ridden out. Hold it until the executor has given the run up.
	waitFor(t, 30*time.Second, "the executor to give the run up", func() bool {
		return strings.Contains(p.out.String(), "terminal event not journaled; retrying until the journal takes it")
	})

	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "/readyz 200 once Redis takes writes", func() bool { return readyz(p) == 200 })
	ta.until(60*time.Second, "the run's terminal event", func() bool { return endsWith(ta, big.RunID) })
	events := allEvents(t, p.URL(), big.RunID)
	checkTerminal(t, "the run Redis refused", events, protocol.EventError)
	sameEvents(t, "the tab vs. the journal", ta.run(big.RunID), events)
	if ep := lastError(t, events); ep.Code != protocol.ErrorInternal && ep.Code != protocol.ErrorInterrupted || strings.Contains(ep.Message, "OOM") {
		t.Fatalf("the run's terminal error: %+v", ep)
	}
	normalRun(t, p)
	noPanic(t, p)
}

// runThenStream is the start of the journal fault tests: a short run
// journaled to its end (checked), then a long run (script) that a tab
// focuses.
func runThenStream(t *testing.T, p *hubProcess, script string) (protocol.RunStartResult, []protocol.Envelope, *tab, protocol.ControlResult) {
	t.Helper()
	before := startHTTP(t, p, `{"tokens":20,"token_ms":0,"tools":1}`)
	beforeEvents := waitTerminal(t, p, before.RunID, 30*time.Second)
	checkDone(t, "the run before the fault", beforeEvents, 20)
	ta := dialTab(t, p)
	big := ta.start(script)
	ta.c.Focus(ta.ctx(), big.SessionID, "")
	return before, beforeEvents, ta, big
}

// mountTmpfs mounts a tmpfs on dir with opts, unmounted when the test
// ends (after the processes it started are killed, since cleanups run in
// reverse). false when this process may not mount.
func mountTmpfs(t *testing.T, dir, opts string, flags uintptr) bool {
	t.Helper()
	if os.Getenv("RUNHUB_FAULT_NO_MOUNT") != "" {
		return false
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Logf("cannot mount a tmpfs (%v)", err)
		return false
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return true
}

func remount(t *testing.T, dir, opts string, flags uintptr) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|flags, opts); err != nil {
		t.Fatalf("remount %s %s: %v", dir, opts, err)
	}
}

// serveExit runs hub serve on data and returns its output once it exits
// (the test fails if it keeps running past 15 s or exits 0).
func serveExit(t *testing.T, data string) string {
	t.Helper()
	cmd := hubCmd([]string{"serve"}, "RUNHUB_ADDR="+freeAddr(t), "RUNHUB_DATA="+data)
	done := make(chan []byte, 1)
	go func() { out, _ := cmd.CombinedOutput(); done <- out }()
	select {
	case out := <-done:
		if cmd.ProcessState.ExitCode() == 0 {
			t.Fatalf("hub serve on %s exited 0:\n%s", data, out)
		}
		return string(out)
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("hub serve on %s kept running", data)
		return ""
	}
}

// A read-only data directory: hub serve exits at once with an error that
// names the directory and says it is not writable, both when the journal
// does not exist yet and when it does; once the directory is writable
// again the hub starts and the journal is intact.
func TestFault_ReadOnlyDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var readOnly, writable func()
	switch {
	case os.Geteuid() != 0:
		os.MkdirAll(dir, 0o755)
		readOnly = func() { os.Chmod(dir, 0o555) }
		writable = func() { os.Chmod(dir, 0o755) }
		t.Cleanup(writable)
	case mountTmpfs(t, dir, "size=16m", 0):
		readOnly = func() { remount(t, dir, "", syscall.MS_RDONLY) }
		writable = func() { remount(t, dir, "", 0) }
	default:
		t.Skip("root without the right to mount: a read-only directory cannot be made")
	}
	check := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, dir) || !strings.Contains(out, "is not writable") || !strings.Contains(out, "RUNHUB_DATA") {
			t.Fatalf("%s: the error does not say the data directory is not writable:\n%s", what, out)
		}
	}
	readOnly()
	check("an empty read-only directory", serveExit(t, dir))
	check("a read-only directory to create", serveExit(t, filepath.Join(dir, "sub")))

	writable()
	p := startHub(t, dir)
	run := startHTTP(t, p, `{"tokens":30,"token_ms":0,"tools":1}`)
	first := waitTerminal(t, p, run.RunID, 30*time.Second)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	readOnly()
	check("a read-only directory with a journal", serveExit(t, dir))
	writable()
	p = startHub(t, dir)
	sameEvents(t, "the journal after the read-only start", allEvents(t, p.URL(), run.RunID), first)
	checkDone(t, "the run before", first, 30)
}

// prlimitFsize sets a running process's RLIMIT_FSIZE soft limit.
func prlimitFsize(t *testing.T, pid int, n uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: n, Max: ^uint64(0)}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE),
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit: %v", errno)
	}
}

// checkJournal opens the embedded journal in data (the hub stopped) and
// fails the test unless every run of every session reads back whole: seqs
// 1…last without a gap, one terminal event and only as the last one for an
// ended run, none for a run still active. It returns the runs read.
func checkJournal(t *testing.T, data string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := bolt.Open(filepath.Join(data, "journal.db"), bolt.Options{})
	if err != nil {
		t.Fatalf("reopen the journal: %v", err)
	}
	defer store.Close()
	sessions, err := store.Sessions(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, s := range sessions {
		for _, rid := range s.Runs {
			meta, err := store.Run(ctx, rid)
			if err != nil {
				t.Fatalf("run %s of %s: %v", rid, s.ID, err)
			}
			var events []protocol.Envelope
			for after := uint64(0); ; {
				page, err := store.Read(ctx, rid, after, 1000)
				if err != nil {
					t.Fatalf("read %s: %v", rid, err)
				}
				events = append(events, page...)
				if len(page) < 1000 {
					break
				}
				after = page[len(page)-1].Seq
			}
			contiguous(t, "run "+rid, events, 1)
			if uint64(len(events)) != meta.LastSeq {
				t.Fatalf("run %s: %d events, meta last seq %d", rid, len(events), meta.LastSeq)
			}
			if k := terminals(events); meta.Terminal && (k != 1 || !events[len(events)-1].Terminal) || !meta.Terminal && k != 0 {
				t.Fatalf("run %s: %d terminal events, meta terminal %v", rid, k, meta.Terminal)
			}
			runs++
		}
	}
	return runs
}

// The embedded journal's disk fills up mid-run (a 1 MiB tmpfs, or where
// mounting is not allowed a 1 MiB RLIMIT_FSIZE): appends fail with "no
// space left on device" (or "file too large") in the log, /readyz says
// 503 "journal not writable", the runs already journaled stay readable and
// the hub stays up. When space returns the run ends with exactly one
// terminal error (the tab focused on it gets it), /readyz is 200, a new
// run completes, and the journal reopened after the hub stops reads back
// whole.
func TestFault_DiskFull(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	var env []string
	var grow func(p *hubProcess)
	noSpace := "no space left on device"
	if mountTmpfs(t, data, "size=1m", 0) {
		grow = func(*hubProcess) { remount(t, data, "size=64m", 0) }
	} else {
		t.Log("emulating a full disk with RLIMIT_FSIZE")
		os.MkdirAll(data, 0o755)
		env = append(env, "RUNHUB_TEST_FSIZE="+strconv.Itoa(1<<20))
		grow = func(p *hubProcess) { prlimitFsize(t, p.cmd.Process.Pid, ^uint64(0)) }
		noSpace = "file too large"
	}
	p := startHub(t, data, env...)
	before, beforeEvents, ta, big := runThenStream(t, p, `{"tokens":200000,"token_ms":0,"tools":0}`)
	waitFor(t, 60*time.Second, "the journal to fail with "+noSpace, func() bool { return strings.Contains(p.out.String(), noSpace) })
	waitFor(t, 10*time.Second, "/readyz 503", func() bool { return readyz(p) == 503 })
	code, body := httpBody(t, "GET", p.URL()+"/readyz", "")
	if code != 503 || !strings.Contains(string(body), "journal not writable") {
		t.Fatalf("/readyz with a full disk: %d %s", code, body)
	}
	healthy(t, p, 5*time.Second)
	sameEvents(t, "the earlier run while the disk is full", allEvents(t, p.URL(), before.RunID), beforeEvents)
	// A small write may still fit in pages the journal freed: either it
	// does or it fails cleanly, without the system's error.
	if code, body := httpBody(t, "POST", p.URL()+"/v1/sessions", `{"title":"x"}`); code != 201 && code < 500 || strings.Contains(string(body), noSpace) {
		t.Fatalf("creating a session with a full disk: %d %s", code, body)
	}
	st := runStatus(t, p, big.RunID)
	if st.Terminal {
		t.Fatalf("the run ended while the disk was full: %+v", st)
	}
	t.Logf("the disk filled at seq %d; the run is %s", st.LastSeq, st.Status)

	grow(p)
	waitFor(t, 30*time.Second, "/readyz 200 once space returns", func() bool { return readyz(p) == 200 })
	ta.until(60*time.Second, "the run's terminal event", func() bool { return endsWith(ta, big.RunID) })
	journal := allEvents(t, p.URL(), big.RunID)
	checkTerminal(t, "the run the full disk ended", journal, protocol.EventError)
	sameEvents(t, "the tab vs. the journal", ta.run(big.RunID), journal)
	// A run whose appends the journal refuses past the executor's retries
	// ends interrupted ("the journal was unavailable for longer than the
	// run could wait", protocol.md §3); a failure of another kind, internal.
	if ep := lastError(t, journal); ep.Code != protocol.ErrorInternal && ep.Code != protocol.ErrorInterrupted || strings.Contains(ep.Message, noSpace) {
		t.Fatalf("the run's terminal error: %+v", ep)
	}
	normalRun(t, p)
	noPanic(t, p)
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, tail(p.out.String(), 4000))
	}
	n := checkJournal(t, data)
	t.Logf("the journal reopened: %d runs read back whole", n)
	if n < 3 {
		t.Fatalf("%d runs in the journal, want at least 3", n)
	}
}

// The queue hand-off under crashes (docs/security.md): the process that
// executes a session's runs is SIGKILLed at every point between a run's
// terminal event and the run.started of the message queued behind it — a
// hub on the embedded journal (restarted on the same data directory), a
// hub executing its runs on Redis and a runner (each replaced by a new
// one). Every queued message that was answered 200 starts exactly once,
// in order.
func TestFault_QueueCrash(t *testing.T) {
	for _, d := range []struct {
		name string
		new  func() queueCrash
	}{{"embedded", embeddedQueueCrash}, {"redis", redisQueueCrash}, {"runners", runnersQueueCrash}} {
		for _, point := range queueCrashPoints {
			t.Run(fmt.Sprintf("%s/%d", d.name, point), func(t *testing.T) { testQueueCrash(t, d.new(), point) })
		}
	}
}
