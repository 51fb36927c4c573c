package hub_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// wireTab is a socket read frame by frame, to count the bytes a focus costs
// and to see records as they are on the wire.
type wireTab struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialRaw(t *testing.T, th *testHub, caps ...string) (*wireTab, protocol.Welcome) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	ws, _, err := websocket.Dial(ctx, th.WSURL, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	r := &wireTab{t: t, ws: ws}
	r.send(protocol.Hello{Type: protocol.MsgHello, Client: "test", Capabilities: caps})
	var w protocol.Welcome
	for _, line := range r.frame(ctx) {
		if err := json.Unmarshal([]byte(line), &w); err == nil && w.Type == protocol.MsgWelcome {
			return r, w
		}
	}
	t.Fatal("no welcome")
	return nil, w
}

func (r *wireTab) send(v any) {
	r.t.Helper()
	b, _ := json.Marshal(v)
	if err := r.ws.Write(ctxT(r.t, 5*time.Second), websocket.MessageText, b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *wireTab) frame(ctx context.Context) []string {
	r.t.Helper()
	_, b, err := r.ws.Read(ctx)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return strings.Split(string(b), "\n")
}

// focusRecords focuses sid (after cursor) and reads until replayed: the
// event records, the bytes of their lines and the marker.
func (r *wireTab) focusRecords(sid, cursor string) ([]protocol.Compacted, int, protocol.Replayed) {
	r.t.Helper()
	f := map[string]any{"type": "focus", "session_id": sid}
	if cursor != "" {
		f["cursor"] = cursor
	}
	r.send(f)
	ctx := ctxT(r.t, 30*time.Second)
	var recs []protocol.Compacted
	bytes := 0
	for {
		for _, line := range r.frame(ctx) {
			var m struct {
				Type  string              `json:"type"`
				Event *protocol.Compacted `json:"event"`
				protocol.Replayed
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				r.t.Fatalf("bad line %q: %v", line, err)
			}
			switch m.Type {
			case protocol.MsgEvent:
				recs = append(recs, *m.Event)
				bytes += len(line)
			case protocol.MsgReplayed:
				m.Replayed.Type = m.Type
				return recs, bytes, m.Replayed
			}
		}
	}
}

// deltaText is the text a delta event or record carries ("" for others).
func deltaText(t *testing.T, e *protocol.Envelope) string {
	t.Helper()
	var p struct {
		Text string `json:"text"`
	}
	if e.Type != protocol.EventTokenDelta && e.Type != protocol.EventReasoningDelta {
		return ""
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return string(e.Type) + ":" + p.Text
}

// checkCovers asserts that recs cover exactly the events after seq `after`
// of want, in order, each once, with the same text: what a client that
// applies the records renders is what it renders from the events.
func checkCovers(t *testing.T, recs []protocol.Compacted, want []protocol.Envelope, after uint64, compact bool) {
	t.Helper()
	next := after + 1
	for _, r := range recs {
		if r.First() != next || r.Seq < r.First() {
			t.Fatalf("after %d: record %d..%d, want it to start at %d", after, r.First(), r.Seq, next)
		}
		if !compact && r.SeqFrom != 0 {
			t.Fatalf("a socket without compact_replay got a merged record %d..%d", r.SeqFrom, r.Seq)
		}
		if r.EventID != protocol.EventID(r.RunID, r.Seq) {
			t.Fatalf("record %d..%d has event_id %s", r.First(), r.Seq, r.EventID)
		}
		orig := want[r.Seq-1]
		if r.Type != orig.Type || r.Terminal != orig.Terminal || r.CreatedAt != orig.CreatedAt {
			t.Fatalf("record %d..%d: %s terminal=%v, want the last event's %s terminal=%v", r.First(), r.Seq, r.Type, r.Terminal, orig.Type, orig.Terminal)
		}
		if r.SeqFrom == 0 && string(r.Payload) != string(orig.Payload) {
			t.Fatalf("event %d changed: %s, want %s", r.Seq, r.Payload, orig.Payload)
		}
		for s := r.First(); s <= r.Seq; s++ {
			if s != r.First() && (want[s-1].Type != r.Type) {
				t.Fatalf("record %d..%d merges %s with %s", r.First(), r.Seq, want[s-1].Type, r.Type)
			}
		}
		next = r.Seq + 1
	}
	if int(next-1) != len(want) {
		t.Fatalf("after %d: records end at %d, want %d", after, next-1, len(want))
	}
	// The concatenated texts equal those of the events covered.
	var gotText strings.Builder
	for _, r := range recs {
		gotText.WriteString(deltaText(t, &r.Envelope))
	}
	var expText strings.Builder
	for _, e := range want[after:] {
		expText.WriteString(deltaText(t, &e))
	}
	if strip(gotText.String()) != strip(expText.String()) {
		t.Fatalf("after %d: text differs:\n got %.200q\nwant %.200q", after, strip(gotText.String()), strip(expText.String()))
	}
}

// strip drops the type prefixes deltaText adds, keeping the text.
func strip(s string) string {
	s = strings.ReplaceAll(s, string(protocol.EventTokenDelta)+":", "")
	return strings.ReplaceAll(s, string(protocol.EventReasoningDelta)+":", "")
}

func runEvents(t *testing.T, th *testHub, runID string) []protocol.Envelope {
	t.Helper()
	var all []protocol.Envelope
	for {
		page, err := th.Store.Read(context.Background(), runID, uint64(len(all)), 1000)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all
		}
	}
}

func finishedRun(t *testing.T, th *testHub, m protocol.Control) protocol.ControlResult {
	t.Helper()
	ctl := th.Dial(t)
	res := startRun(t, ctl, m)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := th.Store.Run(context.Background(), res.RunID); err == nil && r.Terminal {
			return res
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", res.RunID)
	return res
}

// A finished 3,000-token run focused by a tab that took compact_replay
// arrives in at most 10 % of the bytes a tab without it gets, covering the
// same events with the same text; the old tab's replay is unchanged.
func TestCompactReplay_Bytes(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	res := finishedRun(t, th, simStart("", 3000, 0, `,"reasoning":200`))
	want := runEvents(t, th, res.RunID)

	old, w0 := dialRaw(t, th)
	if len(w0.Capabilities) != 0 {
		t.Fatalf("welcome without the capability lists %v", w0.Capabilities)
	}
	oldRecs, oldBytes, oldMark := old.focusRecords(res.SessionID, "")
	checkCovers(t, oldRecs, want, 0, false)
	if len(oldRecs) != len(want) {
		t.Fatalf("old client: %d records for %d events", len(oldRecs), len(want))
	}

	tab, w1 := dialRaw(t, th, "unknown-capability", protocol.CapCompactReplay)
	if len(w1.Capabilities) != 1 || w1.Capabilities[0] != protocol.CapCompactReplay {
		t.Fatalf("welcome capabilities %v, want [compact_replay]", w1.Capabilities)
	}
	recs, n, mark := tab.focusRecords(res.SessionID, "")
	checkCovers(t, recs, want, 0, true)
	if mark.Count != oldMark.Count || mark.Cursor != oldMark.Cursor || mark.Count != len(want) {
		t.Fatalf("replayed %+v, the old client's %+v; want count %d", mark, oldMark, len(want))
	}
	t.Logf("%d events: %d bytes one event per record; compacted %d records, %d bytes (%.1f %%)", len(want), oldBytes, len(recs), n, 100*float64(n)/float64(oldBytes))
	if n*10 > oldBytes {
		t.Fatalf("compacted replay is %d bytes, more than 10 %% of %d", n, oldBytes)
	}
}

// Resuming after any event, including right after a merged record's seq
// and at every page boundary of the journal read (16 events), loses and repeats
// nothing: the records cover exactly the events after the cursor.
func TestCompactReplay_EveryCursor(t *testing.T) {
	th := newTestHub(t, hub.Config{ReplayPage: 2}) // compacted reads: 16 events a page
	res := finishedRun(t, th, simStart("", 30, 0, `,"reasoning":9,"tools":2`))
	want := runEvents(t, th, res.RunID)
	tab, _ := dialRaw(t, th, protocol.CapCompactReplay)
	merged := 0
	for k := 0; k <= len(want); k++ {
		recs, _, mark := tab.focusRecords(res.SessionID, protocol.EventID(res.RunID, uint64(k)))
		checkCovers(t, recs, want, uint64(k), true)
		if mark.Count != len(want)-k || mark.Cursor != protocol.EventID(res.RunID, uint64(len(want))) {
			t.Fatalf("after %d: replayed %+v, want count %d", k, mark, len(want)-k)
		}
		for _, r := range recs {
			if r.SeqFrom != 0 {
				merged++
			}
		}
	}
	if merged == 0 {
		t.Fatal("no record was merged")
	}
}

// A tab that resumes with the cursor of a merged record's last seq while
// the run goes on gets the rest live, once.
func TestCompactReplay_ResumeLive(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	ctl := th.Dial(t)
	res := startRun(t, ctl, simStart("", 400, 5, ""))
	tab, _ := dialRaw(t, th, protocol.CapCompactReplay)
	// Let some tokens land, then focus: the replayed part is compacted.
	time.Sleep(300 * time.Millisecond)
	recs, _, mark := tab.focusRecords(res.SessionID, "")
	if len(recs) == 0 || mark.Cursor != protocol.EventID(res.RunID, recs[len(recs)-1].Seq) {
		t.Fatalf("replay %d records, marker %+v", len(recs), mark)
	}
	cursor := recs[len(recs)-1].Seq
	// A second tab resumes right after it and reads to the end.
	tab2, _ := dialRaw(t, th, protocol.CapCompactReplay)
	recs2, _, _ := tab2.focusRecords(res.SessionID, protocol.EventID(res.RunID, cursor))
	ctx := ctxT(t, 60*time.Second)
	for len(recs2) == 0 || !recs2[len(recs2)-1].Terminal {
		for _, line := range tab2.frame(ctx) {
			var m struct {
				Type  string              `json:"type"`
				Event *protocol.Compacted `json:"event"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Type == protocol.MsgEvent {
				recs2 = append(recs2, *m.Event)
			}
		}
	}
	want := runEvents(t, th, res.RunID)
	checkCovers(t, recs2, want, cursor, true)
}
