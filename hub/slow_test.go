package hub_test

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// A tab that stops reading while a run streams costs bounded memory and
// does not hold back a second tab; when it reads again it is caught up from
// the journal with no gap and no duplicate.
func TestWS_SlowConsumerBoundedAndCaughtUp(t *testing.T) {
	checkSlowConsumer(t, 5000, 0)
}

// The same with one core: the hub has one sender, which writes for both
// tabs and the control socket. The tokens come 1 ms apart, so the stalled
// tab still takes live events, written by the sender, when its buffers
// fill: the rest goes to its own writer, and both tabs get the whole run
// in order. (That the sender never waits on it is
// TestSenderPassesAStalledSocketBy's.)
func TestWS_StalledTabOnTheSameSenderHoldsNoOtherBack(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	checkSlowConsumer(t, 2000, 1)
}

func checkSlowConsumer(t *testing.T, tokens, tokenMS int) {
	const queue = 64
	// Small socket buffers on both ends stand in for a slow link, so a few
	// thousand events are enough to stall the hub's writes to that tab.
	lc := net.ListenConfig{Control: sockBuf(syscall.SO_SNDBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	th := newTestHubListener(t, hub.Config{QueueEvents: queue, MaxBatchBytes: 8 << 10, WriteTimeout: 2 * time.Minute}, ln)
	ctl := th.Dial(t)
	ctx := ctxT(t, 2*time.Minute)

	sess := startRun(t, ctl, simStart("", 1, 0, `,"tools":0`))
	waitTerminal(t, th, sess.RunID)

	// The stalled tab: a raw socket that says hello, focuses, then stops
	// reading (its TCP buffers fill, then the hub's writes block).
	dialer := &net.Dialer{Control: sockBuf(syscall.SO_RCVBUF)}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	defer hc.CloseIdleConnections()
	stalled, err := client.Dial(ctx, th.WSURL, client.Options{Inbox: 1, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Focus(ctx, sess.SessionID, "")

	fast := th.Dial(t)
	fast.Focus(ctx, sess.SessionID, "")

	run := startRun(t, ctl, simStart(sess.SessionID, tokens, tokenMS, `,"tools":0`))

	maxQueued, sawLagging := 0, false
	col := newCollector()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			st := th.Hub.Stats()
			maxQueued = max(maxQueued, st.MaxQueueEvents)
			sawLagging = sawLagging || st.Lagging > 0
		}
	}()
	col.Until(t, fast, time.Minute, "fast tab gets the whole run", func() bool { return col.TerminalOf(run.RunID) })
	close(stop)
	<-done
	var runEvents []protocol.Envelope
	for _, e := range col.Events {
		if e.RunID == run.RunID {
			runEvents = append(runEvents, e)
		}
	}
	if got := checkRun(t, runEvents, run.RunID); got != sim.Text(tokens) {
		t.Fatal("fast tab text differs")
	}
	if !sawLagging {
		t.Fatal("the stalled tab never fell behind: the test did not stall it")
	}
	if maxQueued > queue {
		t.Fatalf("a socket queued %d events, bound %d", maxQueued, queue)
	}
	st := th.Hub.Stats()
	if st.QueuedBytes > 4*queue*1024 {
		t.Fatalf("hub holds %d queued bytes for a stalled tab", st.QueuedBytes)
	}

	// The stalled tab reads again: the whole run arrives, caught up.
	rest := newCollector()
	rest.Until(t, stalled, time.Minute, "stalled tab catches up", func() bool { return rest.TerminalOf(run.RunID) })
	var got []protocol.Envelope
	for _, e := range rest.Events {
		if e.RunID == run.RunID {
			got = append(got, e)
		}
	}
	if text := checkRun(t, got, run.RunID); text != sim.Text(tokens) {
		t.Fatal("stalled tab text differs after catch-up")
	}
}

// sockBuf sets a socket buffer option to 4 KiB before connect/listen.
func sockBuf(opt int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 4096) })
		if err != nil {
			return err
		}
		return serr
	}
}
