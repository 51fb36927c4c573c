package main

import (
	"context"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/client"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// hub serve with RUNHUB_REDIS_URL journals to Redis: a run started over the
// socket streams to the focused tab and is readable over HTTP, also after
// the hub restarts on the same Redis.
func TestProcess_RedisJournal(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	p := startHub(t, t.TempDir(), "RUNHUB_REDIS_URL="+rs.URL(), "RUNHUB_RUNTIME=inprocess")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tab, err := client.Dial(ctx, "ws://"+p.addr+"/v1/ws", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	res, err := tab.Control(ctx, protocol.Control{Op: protocol.OpStart, Message: "on redis",
		Metadata: []byte(`{"sim":{"tokens":25,"token_ms":2}}`)})
	if err != nil || !res.Accepted {
		t.Fatalf("start: %+v %v", res, err)
	}
	tab.Focus(ctx, res.SessionID, "")
	var text string
	for done := false; !done; {
		m, err := tab.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if em, ok := m.(*protocol.EventMessage); ok {
			if em.Event.Type == protocol.EventTokenDelta {
				tp, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](em.Event)
				text += tp.Text
			}
			done = em.Event.Terminal
		}
	}
	if text != sim.Text(25) {
		t.Fatalf("text %q", text)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	p = startHub(t, t.TempDir(), "RUNHUB_REDIS_URL="+rs.URL(), "RUNHUB_RUNTIME=inprocess")
	events := allEvents(t, p.URL(), res.RunID)
	if len(events) == 0 || !events[len(events)-1].Terminal || events[len(events)-1].Type != protocol.EventDone {
		t.Fatalf("after restart: %d events", len(events))
	}
}
