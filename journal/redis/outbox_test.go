package redis

import (
	"context"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// Notable events reach the outbox in the script that appends them, once
// the outbox is on; other events never; entries keep the sender's state
// and leave with it.
func TestOutbox_RecordsNotableEvents(t *testing.T) {
	t.Run("single", func(t *testing.T) { testOutbox(t, srv.URL()) })
	t.Run("cluster", func(t *testing.T) { testOutbox(t, clusterURL(t)) })
}

func testOutbox(t *testing.T, url string) {
	ctx := context.Background()
	s := openStore(t, Options{URL: url, Shards: 4})
	mkRun(t, s, "s1", "r1")
	if _, err := s.Append(ctx, approvalEv("s1", "r1"), ""); err != nil {
		t.Fatal(err)
	}
	if en, err := s.OutboxList(ctx, 10); err != nil || len(en) != 0 {
		t.Fatalf("outbox off: %v %v, want nothing recorded", en, err)
	}
	if err := s.EnableOutbox(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableOutbox(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	// Another Store on the same journal (a runner) records too.
	other := openStore(t, Options{URL: url, Shards: 4, Prefix: s.opts.Prefix})
	mkRun(t, s, "s2", "r2")
	for _, e := range []protocol.Envelope{token("s1", "r1", "x"), approvalEv("s1", "r1"), done("s1", "r1")} {
		if _, err := s.Append(ctx, e, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Append(ctx, approvalEv("s2", "r2"), ""); err != nil {
		t.Fatal(err)
	}
	en, err := s.OutboxList(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range en {
		got[e.RunID+" "+string(e.Type)+" "+itoa(e.Seq)] = true
	}
	want := []string{"r1 approval.requested 3", "r1 done 4", "r2 approval.requested 1"}
	if len(en) != len(want) {
		t.Fatalf("outbox %+v, want %v", en, want)
	}
	for _, w := range want {
		if !got[w] {
			t.Fatalf("outbox %+v lacks %s", en, w)
		}
	}
	if err := s.OutboxSave(ctx, en[0].ID, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if en2, _ := s.OutboxList(ctx, 1); len(en2) != 1 || string(en2[0].State) != `{"n":1}` || en2[0].ID != en[0].ID {
		t.Fatalf("state not kept: %+v", en2)
	}
	for _, e := range en {
		if err := s.OutboxDelete(ctx, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A save after the delete leaves nothing behind.
	if err := s.OutboxSave(ctx, en[0].ID, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if en, err := s.OutboxList(ctx, 10); err != nil || len(en) != 0 {
		t.Fatalf("after delete: %v %v", en, err)
	}
	for n := range s.k.shards() {
		if k, _ := s.rdb.HLen(ctx, s.k.outboxState(n)).Result(); k != 0 {
			t.Fatalf("shard %d keeps %d states after the deletes", n, k)
		}
	}
	// A state left by an entry the stream's cap trimmed away goes with
	// the next list that finds the outbox empty.
	n := s.k.shardOf("s1")
	if err := s.rdb.HSet(ctx, s.k.outboxState(n), "1-1", `{"n":3}`).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OutboxList(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if k, _ := s.rdb.Exists(ctx, s.k.outboxState(n)).Result(); k != 0 {
		t.Fatal("an orphaned state survived a list of the empty outbox")
	}
	if err := s.OutboxDelete(ctx, "bogus"); err == nil {
		t.Fatal("a bogus id was accepted")
	}
}

func approvalEv(sid, rid string) protocol.Envelope {
	e, _ := protocol.NewEvent(rid, sid, protocol.EventApprovalReq, protocol.ApprovalRequestedPayload{ApprovalID: "a", Summary: "ok?", Choices: []string{"once"}})
	return e
}

func itoa(n uint64) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}
