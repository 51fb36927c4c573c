package hub_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// What an idle tab socket costs (docs/benchmarks.md, "Idle tabs").

// A watch of sessions the hub already tracks reads no meta from the
// journal: the tracker knows their ids and owners. A burst of tabs
// watching the same sessions read ten metas per tab before. The first
// watch of a session reads its meta once, and its load reads it again.
func TestWatch_TrackedSessionsReadNoMeta(t *testing.T) {
	th := newTestHubRuntime(t, hub.Config{}, runtimeOpts{Counted: true})
	ctx := ctxT(t, 20*time.Second)
	sids := make([]string, 3)
	for i := range sids {
		var sess protocol.CreateSessionResult
		do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
		sids[i] = sess.SessionID
	}
	watch := func(what string) int64 {
		t.Helper()
		if !th.Counted.Settled() {
			t.Fatalf("before %s: meta reads never settled", what)
		}
		before := th.Counted.Reads()
		tab := th.Dial(t)
		if err := tab.Watch(ctx, false, sids...); err != nil {
			t.Fatal(err)
		}
		col := newCollector()
		col.Until(t, tab, 10*time.Second, what+": every status", func() bool { return len(col.Statuses) == len(sids) })
		if !th.Counted.Settled() {
			t.Fatalf("after %s: meta reads never settled", what)
		}
		return th.Counted.Reads() - before
	}
	if n := watch("the first watch"); n != 2*int64(len(sids)) {
		t.Errorf("the first watch of %d sessions read %d metas; want %d (the watch's, the load's)", len(sids), n, 2*len(sids))
	}
	for i := range 3 {
		if n := watch("a later watch"); n != 0 {
			t.Errorf("watch %d of tracked sessions read %d metas; want none", i+2, n)
		}
	}
}

// An idle socket has no goroutine reading it: the hub's poller waits for
// its bytes (poller_linux.go) and each frame is read on a goroutine started
// for it. Where there is no poller, its reader waits parked a few frames
// deep (readable), not inside the WebSocket library's read: a read there
// grows the goroutine's stack to 4 KiB and keeps it for the socket's life.
func TestIdleSocketHasNoReader(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctx := ctxT(t, 20*time.Second)
	var sess protocol.CreateSessionResult
	do(t, "POST", th.URL+"/v1/sessions", `{}`, nil, &sess)
	tab := th.Dial(t)
	if err := tab.Watch(ctx, false, sess.SessionID); err != nil {
		t.Fatal(err)
	}
	if err := tab.Focus(ctx, sess.SessionID, ""); err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	col.Until(t, tab, 10*time.Second, "the status", func() bool { return len(col.Statuses) == 1 })
	var readers, shallow, deep int
	for deadline := time.Now().Add(5 * time.Second); ; {
		readers, shallow, deep = 0, 0, 0
		buf := make([]byte, 1<<20)
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if !strings.Contains(g, "tabsock.(*Conn).readLoop") && !strings.Contains(g, "tabsock.(*Conn).turn") {
				continue
			}
			readers++
			switch {
			case strings.Contains(g, "websocket.(*Conn).Read"):
				deep++
			case strings.Contains(g, "tabsock.(*Conn).WaitReadable"):
				shallow++
			}
		}
		idle := deep == 0 && readers == shallow && (readers == 0) == (runtime.GOOS == "linux")
		if idle || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if runtime.GOOS == "linux" && readers != 0 {
		t.Fatalf("%d goroutines read idle sockets (%d in the library's read); want none: the poller waits", readers, deep)
	}
	if runtime.GOOS != "linux" && (shallow < 1 || deep != 0) {
		t.Fatalf("idle readers: %d parked in waitReadable, %d in the library's read; want ≥ 1 and 0", shallow, deep)
	}
	// The socket still reads: a ping is answered.
	if err := tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "p"}); err != nil {
		t.Fatal(err)
	}
	col.Until(t, tab, 10*time.Second, "the pong", func() bool {
		for _, m := range col.Other {
			if p, ok := m.(*protocol.Pong); ok && p.ID == "p" {
				return true
			}
		}
		return false
	})
}
