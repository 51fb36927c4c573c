package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// BenchmarkFocusSwitchBytes measures what one focus switch sends a tab
// that watches n sessions (issue #39 point 2): it switches between two
// finished runs of 300 token events each and counts, per switch, the bytes
// and frames of statuses and of everything else (the replay), read for
// four status intervals after the switch; and the statuses the initial
// watch sent per session (1: each once). Bytes, not time: the figures do
// not depend on the machine.
//
//	go test -run '^$' -bench FocusSwitchBytes -benchtime 20x ./hub
func BenchmarkFocusSwitchBytes(b *testing.B) {
	for _, n := range []int{10, 200, 1000} {
		b.Run(fmt.Sprintf("watched=%d", n), func(b *testing.B) { benchFocusBytes(b, n) })
	}
}

func benchFocusBytes(b *testing.B, n int) {
	const interval = 50 * time.Millisecond
	th := newTestHub(b, hub.Config{StatusInterval: interval, MaxWatch: 2000, MessagesPerSecond: 1e6, MessageBurst: 1e6})
	ctl := th.Dial(b)
	var sids []string
	for i := range n {
		tokens := 1
		if i < 2 {
			tokens = 300
		}
		sids = append(sids, startRun(b, ctl, simStart("", tokens, 0, `,"tools":0`)).SessionID)
	}
	for _, sid := range sids {
		m := sessionMeta(b, th, sid)
		waitTerminal(b, th, m.LatestRun())
	}
	ws := rawSocket(b, th, nil)
	ws.SetReadLimit(64 << 20) // a watch of 1,000 sessions answers in large batches
	in := frames(ws)
	sendRaw(b, ws, `{"type":"hello","client":"bench"}`)
	watch, _ := json.Marshal(protocol.Watch{Type: protocol.MsgWatch, Sessions: sids})
	sendRaw(b, ws, string(watch))
	_, watchStatuses, _, _ := drainFrames(b, in, time.Second)
	var statusBytes, statusN, otherBytes, otherN int
	b.ResetTimer()
	for i := range b.N {
		sid := sids[i%2]
		focus, _ := json.Marshal(protocol.Focus{Type: protocol.MsgFocus, SessionID: &sid})
		sendRaw(b, ws, string(focus))
		sb, sn, ob, on := drainFrames(b, in, 4*interval)
		statusBytes, statusN, otherBytes, otherN = statusBytes+sb, statusN+sn, otherBytes+ob, otherN+on
	}
	b.ReportMetric(float64(watchStatuses)/float64(n), "watch-statuses/session")
	b.ReportMetric(float64(statusBytes)/float64(b.N), "status-B/switch")
	b.ReportMetric(float64(statusN)/float64(b.N), "statuses/switch")
	b.ReportMetric(float64(otherBytes)/float64(b.N), "replay-B/switch")
	b.ReportMetric(float64(otherN)/float64(b.N), "replay-msgs/switch")
}

// frames reads ws until it closes, each message onto the channel.
func frames(ws *websocket.Conn) <-chan []byte {
	ch := make(chan []byte, 1024)
	go func() {
		defer close(ch)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			ch <- data
		}
	}()
	return ch
}

// drainFrames reads in for d and sums the status messages' bytes and
// count and the other messages'.
func drainFrames(b *testing.B, in <-chan []byte, d time.Duration) (statusBytes, statuses, otherBytes, others int) {
	end := time.After(d)
	for {
		select {
		case <-end:
			return
		case data, ok := <-in:
			if !ok {
				b.Fatal("the socket closed")
			}
			for _, line := range protocol.SplitBatch(data) {
				var head struct{ Type string }
				json.Unmarshal(line, &head)
				if head.Type == protocol.MsgStatus {
					statusBytes, statuses = statusBytes+len(line), statuses+1
				} else {
					otherBytes, others = otherBytes+len(line), others+1
				}
			}
		}
	}
}
