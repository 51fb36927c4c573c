package bolt

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// With Options.Outbox, notable events are in the outbox as soon as their
// append returns (one transaction) and survive a reopen; without it,
// nothing is recorded.
func TestOutbox_RecordsNotableEvents(t *testing.T) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "j.db")
		s, err := Open(path, Options{Outbox: on, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSession(ctx, journal.SessionMeta{ID: "s1", Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		if err := s.BeginRun(ctx, journal.RunMeta{ID: "r1", SessionID: "s1"}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range []struct {
			typ protocol.EventType
			p   any
		}{
			{protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: "x"}},
			{protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a", Summary: "ok?", Choices: []string{"once"}}},
			{protocol.EventError, protocol.ErrorPayload{Code: "x", Message: "not terminal", Terminal: false}},
			{protocol.EventClarifyReq, protocol.ClarifyRequestedPayload{ClarifyID: "c", Question: "?"}},
			{protocol.EventCancelled, protocol.CancelledPayload{Reason: "user"}},
		} {
			e, _ := protocol.NewEvent("r1", "s1", ev.typ, ev.p)
			if _, err := s.Append(ctx, e, ""); err != nil {
				t.Fatal(err)
			}
		}
		en, err := s.OutboxList(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !on {
			if len(en) != 0 {
				t.Fatalf("outbox off: %+v", en)
			}
			s.Close()
			continue
		}
		if len(en) != 3 || en[0].Seq != 2 || en[1].Seq != 4 || en[2].Seq != 5 || en[2].Type != protocol.EventCancelled || en[0].SessionID != "s1" {
			t.Fatalf("outbox %+v, want seqs 2, 4, 5", en)
		}
		if err := s.OutboxSave(ctx, en[1].ID, []byte(`{"n":2}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.OutboxDelete(ctx, en[0].ID); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err = Open(path, Options{Outbox: on})
		if err != nil {
			t.Fatal(err)
		}
		en2, err := s.OutboxList(ctx, 10)
		if err != nil || len(en2) != 2 || string(en2[0].State) != `{"n":2}` || en2[1].ID != en[2].ID {
			t.Fatalf("after reopen: %+v %v", en2, err)
		}
		if err := s.OutboxDelete(ctx, "zz"); err == nil {
			t.Fatal("a bogus id was accepted")
		}
		s.Close()
	}
}
