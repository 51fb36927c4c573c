package hub_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/protocol"
)

// One watch of 1,000 unknown session ids (the documented bound) is answered
// with exactly one error not_found listing them, not 1,000 errors that fill
// the socket's message queue and close it with 1008; the socket stays open
// and later messages work. A watch mixing known and unknown ids watches the
// known ones and names only the unknown ones.
func TestWatch_UnknownIDsOneError(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	tab := th.Dial(t)
	ctx := ctxT(t, 30*time.Second)
	unknown := make([]string, 1000)
	for i := range unknown {
		unknown[i] = fmt.Sprintf("s_unknown%04d", i)
	}
	if err := tab.Watch(ctx, false, unknown...); err != nil {
		t.Fatal(err)
	}
	tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "after-watch"})
	col := newCollector()
	pong := func(id string) bool {
		for _, m := range col.Other {
			if p, ok := m.(*protocol.Pong); ok && p.ID == id {
				return true
			}
		}
		return false
	}
	col.Until(t, tab, 20*time.Second, "the pong after the watch", func() bool { return pong("after-watch") })
	if len(col.Errors) != 1 {
		t.Fatalf("%d errors, want 1", len(col.Errors))
	}
	e := col.Errors[0]
	if e.Code != protocol.CodeNotFound || e.Ref != protocol.MsgWatch || !slices.Equal(e.Sessions, unknown) {
		t.Fatalf("error %s %q ref %q listing %d ids, want not_found listing the 1,000 unknown ids", e.Code, e.Message, e.Ref, len(e.Sessions))
	}

	// The socket still works: a mixed watch watches the known sessions and
	// names only the unknown id.
	var sess protocol.CreateSessionResult
	do(t, "POST", th.URL+"/v1/sessions", `{"title":"known"}`, nil, &sess)
	if err := tab.Watch(ctx, false, "s_nope", sess.SessionID); err != nil {
		t.Fatal(err)
	}
	tab.Send(ctx, protocol.Ping{Type: protocol.MsgPing, ID: "after-mixed"})
	col = newCollector()
	col.Until(t, tab, 10*time.Second, "the known session's status and the pong", func() bool {
		_, ok := col.Statuses[sess.SessionID]
		return ok && pong("after-mixed")
	})
	if len(col.Errors) != 1 || !slices.Equal(col.Errors[0].Sessions, []string{"s_nope"}) || col.Errors[0].Message != "no such session: s_nope" {
		t.Fatalf("errors %+v, want one naming s_nope", col.Errors)
	}
	select {
	case <-tab.Done():
		t.Fatalf("the socket closed: %v", tab.Err())
	default:
	}
}
