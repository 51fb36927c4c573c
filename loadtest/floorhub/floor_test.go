package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// A focused socket gets a run's events in seq order from 1, each one
// message with the envelope fields loadtest reads, created_at when
// produced, the terminal event last, then the session's terminal status;
// in both write modes. With a journal, the journal file is every event
// received, byte for byte, in seq order, and nothing else (no status).
func TestRunInSeqOrder(t *testing.T) {
	for _, c := range []struct {
		mode    string
		journal bool
	}{{writeRaw, false}, {writeLib, false}, {writeRaw, true}, {writeLib, true}} {
		name := c.mode
		if c.journal {
			name += "-journal"
		}
		t.Run(name, func(t *testing.T) {
			dir := ""
			if c.journal {
				dir = filepath.Join(t.TempDir(), "data")
			}
			f, err := newFloor(c.mode, dir)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(f.routes())
			defer srv.Close()
			defer f.stop()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			var sess struct {
				SessionID string `json:"session_id"`
			}
			post(t, srv.URL+"/v1/sessions", `{"title":"t"}`, &sess)
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws",
				&websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			send := func(v any) {
				b, _ := json.Marshal(v)
				if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
					t.Fatal(err)
				}
			}
			read := func() map[string]any {
				_, b, err := ws.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatalf("%v: %s", err, b)
				}
				return m
			}
			send(protocol.Hello{Type: protocol.MsgHello, Client: strings.Repeat("x", 200)}) // > 125 bytes: 16-bit length
			if m := read(); m["type"] != protocol.MsgWelcome {
				t.Fatalf("want welcome, got %v", m)
			}
			send(protocol.Watch{Type: protocol.MsgWatch, Sessions: []string{sess.SessionID}})
			send(protocol.Focus{Type: protocol.MsgFocus, SessionID: &sess.SessionID})
			if m := read(); m["type"] != protocol.MsgReplayed || m["session_id"] != sess.SessionID {
				t.Fatalf("want replayed, got %v", m)
			}

			const tokens = 200
			var run struct {
				RunID string `json:"run_id"`
			}
			t0 := time.Now()
			post(t, srv.URL+"/v1/sessions/"+sess.SessionID+"/runs",
				`{"message":"m","metadata":{"sim":{"tokens":200,"token_ms":1}}}`, &run)
			var events []byte // every event message received, in order
			for want := uint64(1); want <= tokens+1; want++ {
				_, b, err := ws.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, b...)
				if c.journal { // journaled before it was sent
					if got, err := os.ReadFile(filepath.Join(dir, journalFile)); err != nil || !bytes.HasPrefix(got, events) {
						t.Fatalf("seq %d received before the journal held it and all before it (%d bytes, %v):\n%.300s", want, len(got), err, b)
					}
				}
				if !bytes.HasPrefix(b, []byte(`{"type":"event","event":{"event_id":"`)) || bytes.IndexByte(b, '\n') >= 0 {
					t.Fatalf("event %d: not one event message: %s", want, b)
				}
				var m protocol.EventMessage
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				e := m.Event
				at := protocol.Time(e.CreatedAt)
				switch {
				case e.Seq != want || e.RunID != run.RunID || e.SessionID != sess.SessionID:
					t.Fatalf("got seq %d of %s/%s, want seq %d of %s/%s", e.Seq, e.SessionID, e.RunID, want, sess.SessionID, run.RunID)
				case e.Terminal != (want == tokens+1):
					t.Fatalf("seq %d: terminal %v", e.Seq, e.Terminal)
				case at.Before(t0.Add(-time.Millisecond)) || at.After(time.Now().Add(time.Millisecond)):
					t.Fatalf("seq %d: created_at %v outside [%v, now]", e.Seq, at, t0)
				}
			}
			m := read()
			st, _ := m["session"].(map[string]any)
			if m["type"] != protocol.MsgStatus || st["run_id"] != run.RunID || st["terminal"] != true {
				t.Fatalf("want the terminal status, got %v", m)
			}
			resp, err := http.Get(srv.URL + "/v1/runs/" + run.RunID)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var rs protocol.RunStatus
			json.NewDecoder(resp.Body).Decode(&rs)
			if rs.TerminalState != protocol.StatusCompleted || rs.LastSeq != tokens+1 {
				t.Fatalf("run status %+v", rs)
			}
			if !c.journal {
				return
			}
			if err := f.stop(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, journalFile))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, events) {
				t.Fatalf("the journal (%d bytes) is not the %d events received (%d bytes):\n%.300s\nwant\n%.300s", len(got), tokens+1, len(events), got, events)
			}
			for _, p := range []string{dir, filepath.Join(dir, journalFile)} {
				if st, err := os.Stat(p); err != nil {
					t.Error(err)
				} else if st.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s: %v: want no access for group and others", p, st.Mode())
				}
			}
		})
	}
}

func TestFrameHeader(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []byte
	}{
		{5, []byte{0x81, 5}},
		{125, []byte{0x81, 125}},
		{300, []byte{0x81, 126, 1, 44}},
		{70000, []byte{0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70}},
	} {
		if got := frameHeader(nil, opText, c.n); !bytes.Equal(got, c.want) {
			t.Errorf("%d: % x, want % x", c.n, got, c.want)
		}
		m := newMessage(make([]byte, messageHead+c.n))
		if !bytes.Equal(m.frame[:m.head], c.want) || len(m.payload()) != c.n {
			t.Errorf("%d: message header % x, payload %d", c.n, m.frame[:m.head], len(m.payload()))
		}
	}
}

func post(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}
