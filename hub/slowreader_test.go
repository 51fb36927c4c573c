package hub_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// throttledConn reads at most readChunk bytes per readPause: with a 4 KiB
// receive buffer, the tab's TCP window throttles the hub's writes to it.
type throttledConn struct{ net.Conn }

const (
	readChunk = 1 << 10
	readPause = 5 * time.Millisecond
)

func (c throttledConn) Read(p []byte) (int, error) {
	time.Sleep(readPause)
	return c.Conn.Read(p[:min(len(p), readChunk)])
}

// A tab that reads, but more slowly than a run streams (~200 KB/s through
// a 4 KiB receive buffer, while frames of up to 256 KiB wait for it), is
// never cut: the write timeout counts from the last bytes it took, not
// from a frame's start (a 256 KiB frame takes over a second to it, the
// write timeout is one second), its event queue overflows and it is
// caught up from the journal, and its pings are all answered. It gets the
// whole run once, in order.
func TestWS_SlowReaderIsThrottledNotCut(t *testing.T) {
	lc := net.ListenConfig{Control: sockBuf(syscall.SO_SNDBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	th := newTestHubWith(t, hub.Config{WriteTimeout: time.Second}, ln, runtimeOpts{Bolt: true})
	ctl := th.Dial(t)
	ctx := ctxT(t, 3*time.Minute)
	sess := startRun(t, ctl, simStart("", 1, 0, `,"tools":0`))
	waitTerminal(t, th, sess.RunID)

	dialer := &net.Dialer{Control: sockBuf(syscall.SO_RCVBUF)}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return throttledConn{c}, nil
	}}}
	defer hc.CloseIdleConnections()
	slow, err := client.Dial(ctx, th.WSURL, client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.Focus(ctx, sess.SessionID, ""); err != nil {
		t.Fatal(err)
	}

	const tokens = 6000
	run := startRun(t, ctl, simStart(sess.SessionID, tokens, 0, `,"tools":0`))

	// Pings every 20 ms until the run is through.
	var pings atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	sawLagging := false
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sawLagging = sawLagging || th.Hub.Stats().Lagging > 0
			id := strconv.FormatInt(pings.Add(1), 10)
			if err := slow.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: id}); err != nil {
				return
			}
		}
	}()
	col := newCollector()
	pongs := map[string]bool{}
	readUntil := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			m, err := slow.Next(ctx)
			if err != nil {
				t.Fatalf("waiting for %s: the socket ended: %v (close %d; %d events, %d pongs)", what, err, client.CloseStatus(err), len(col.Events), len(pongs))
			}
			if p, ok := m.(*protocol.Pong); ok {
				pongs[p.ID] = true
				continue
			}
			col.Add(m)
		}
	}
	readUntil("the whole run", func() bool { return col.TerminalOf(run.RunID) })
	close(stop)
	<-done
	sent := pings.Load()
	readUntil("a pong for every ping", func() bool { return int64(len(pongs)) >= sent })
	for i := int64(1); i <= sent; i++ {
		if !pongs[strconv.FormatInt(i, 10)] {
			t.Fatalf("ping %d got no pong", i)
		}
	}
	var got []protocol.Envelope
	for _, e := range col.Events {
		if e.RunID == run.RunID {
			got = append(got, e)
		}
	}
	if text := checkRun(t, got, run.RunID); text != sim.Text(tokens) {
		t.Fatal("the slow tab's text differs")
	}
	if !sawLagging {
		t.Fatal("the slow tab never lagged: the test did not overflow its queue")
	}
	if len(col.Errors) > 0 {
		t.Fatalf("errors: %v", col.Errors)
	}
	t.Logf("%d events, %d pings answered", len(got), sent)
}
