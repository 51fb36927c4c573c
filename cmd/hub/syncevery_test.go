package main

import (
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// With RUNHUB_JOURNAL_SYNC_EVERY the embedded journal acknowledges events
// before it fdatasyncs them, but they are in its files: SIGKILL the hub
// mid-run (here with an hour between syncs, so that none came) and start
// it again, and every event read before the kill is there, unchanged,
// followed by the one interrupted error.
func TestProcess_SyncEveryKeepsAcknowledgedEventsOnKill(t *testing.T) {
	data := t.TempDir()
	env := "RUNHUB_JOURNAL_SYNC_EVERY=1h"
	p := startHub(t, data, env)
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "kill me"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	body := map[string]any{"message": "long", "metadata": map[string]any{"sim": map[string]any{"tokens": 100000, "token_ms": 2}}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	var seen []protocol.Envelope
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 200 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		seen = allEvents(t, p.URL(), run.RunID)
	}
	if len(seen) < 200 {
		t.Fatalf("%d events in 10 s", len(seen))
	}
	p.kill()

	p = startHub(t, data, env)
	after := allEvents(t, p.URL(), run.RunID)
	if len(after) < len(seen)+1 {
		t.Fatalf("after the kill: %d events, want the %d read before it and the terminal one", len(after), len(seen))
	}
	for i, e := range seen {
		if after[i].Seq != e.Seq || string(after[i].Payload) != string(e.Payload) {
			t.Fatalf("event %d after the kill: %d %s, want %d %s", i, after[i].Seq, after[i].Payload, e.Seq, e.Payload)
		}
	}
	last := after[len(after)-1]
	ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&last)
	if last.Type != protocol.EventError || ep.Code != protocol.ErrorInterrupted || ep.LastSeq != last.Seq-1 {
		t.Fatalf("terminal event %+v payload %+v", last, ep)
	}
	for i, e := range after {
		if e.Seq != uint64(i+1) || (e.Terminal != (i == len(after)-1)) {
			t.Fatalf("event %d: seq %d terminal %v", i, e.Seq, e.Terminal)
		}
	}
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out.String())
	}
}
