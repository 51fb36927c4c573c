package hub_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// A replay goes out batched: many NDJSON messages per frame, not one frame
// per event.
func TestWS_ReplayIsBatched(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	run := startRun(t, ctl, simStart("", 500, 0, `,"tools":0`))
	waitTerminal(t, th, run.RunID)

	ctx := ctxT(t, 20*time.Second)
	ws, _, err := websocket.Dial(ctx, th.WSURL, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(16 << 20)
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	send(protocol.Hello{Type: protocol.MsgHello, Client: "batch-test"})
	sid := run.SessionID
	send(protocol.Focus{Type: protocol.MsgFocus, SessionID: &sid})
	frames, events := 0, 0
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		frames++
		done := false
		for _, line := range protocol.SplitBatch(data) {
			m, err := protocol.DecodeServer(line)
			if err != nil {
				t.Fatalf("frame line %q: %v", line, err)
			}
			switch v := m.(type) {
			case *protocol.EventMessage:
				events++
			case *protocol.Replayed:
				done = v.Count == events
				if !done {
					t.Fatalf("replayed count %d, saw %d events", v.Count, events)
				}
			}
		}
		if !bytes.HasSuffix(data, []byte("}")) {
			t.Fatalf("frame does not end with a message: %q", data[len(data)-20:])
		}
		if done {
			break
		}
	}
	if events < 500 || frames*10 > events {
		t.Fatalf("%d events in %d frames: not batched", events, frames)
	}
}

// A tab watching many busy sessions gets a bounded status rate: at most
// about one progress-only status per session per StatusInterval, however
// many events (changes of meaning — running, title, terminal — come on top).
func TestWS_StatusCoalesced(t *testing.T) {
	const interval = 100 * time.Millisecond
	th := newTestHub(t, hub.Config{StatusInterval: interval})
	ctl := th.Dial(t)
	tab := th.Dial(t)
	ctx := ctxT(t, 60*time.Second)
	tab.Watch(ctx, true)
	const sessions, tokens = 20, 200
	runs := make([]protocol.ControlResult, sessions)
	begin := time.Now()
	for i := range runs {
		runs[i] = startRun(t, ctl, simStart("", tokens, 2, `,"tools":0`))
	}
	counts := map[string]int{} // progress-only statuses
	final := map[string]protocol.SessionStatus{}
	for done := 0; done < sessions; {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st, ok := m.(*protocol.StatusMessage)
		if !ok {
			continue
		}
		if prev, ok := final[st.Session.SessionID]; ok && meaningKey(prev) == meaningKey(*st.Session) {
			counts[st.Session.SessionID]++
		}
		if st.Session.Terminal && !final[st.Session.SessionID].Terminal {
			done++
		}
		final[st.Session.SessionID] = *st.Session
	}
	elapsed := time.Since(begin)
	bound := int(elapsed/interval) + 2
	for _, r := range runs {
		if c := counts[r.SessionID]; c > bound {
			t.Errorf("session %s: %d progress-only statuses in %v (bound %d for %d events)", r.SessionID, c, elapsed, bound, tokens)
		}
		if st := final[r.SessionID]; st.Status != protocol.StatusCompleted || st.Tokens != tokens {
			t.Errorf("final status of %s: %+v", r.SessionID, st)
		}
	}
}

// meaningKey is what of a status is sent at once when it changes
// (protocol.md §4.2): everything but the progress fields.
func meaningKey(st protocol.SessionStatus) string {
	st.Tokens, st.LastSeq, st.LastEventID, st.UpdatedAt, st.Progress, st.Usage = 0, 0, "", 0, "", nil
	b, _ := json.Marshal(st)
	return string(b)
}
