package redis

import (
	"context"
	"strings"
	"testing"

	"github.com/runhub/runhub/journal"
)

// readAll reads a stream's records from the start and joins their data.
func readAll(t *testing.T, ss journal.Streams, name string) string {
	t.Helper()
	var b strings.Builder
	var after uint64
	for {
		r, err := ss.ReadStream(context.Background(), name, after, 1<<20, false)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if len(r.Records) == 0 {
			return b.String()
		}
		for _, rec := range r.Records {
			b.Write(rec.Data)
			after = rec.Index
		}
	}
}

// A durable stream's records are a Redis Stream, an entry a record whose
// ID is its index; a generation an earlier runhub wrote as a list is read
// and appended to as a list, and dropped whole.
func TestStreams_RecordsAreARedisStream(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, Options{})
	ss := s.Streams(journal.StreamLimits{})
	if _, _, err := ss.CreateStream(ctx, "fresh", journal.StreamCreate{ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one ", "two ", "three"} {
		if _, err := ss.AppendStream(ctx, "fresh", journal.StreamAppend{ContentType: "text/plain", Data: []byte(p)}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := StreamStore{s}.LoadStream(ctx, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	key := s.k.streamLog("fresh", m.Gen)
	if typ := s.rdb.Type(ctx, key).Val(); typ != "stream" {
		t.Fatalf("records at %s are a %q, want a stream", key, typ)
	}
	msgs := s.rdb.XRange(ctx, key, "-", "+").Val()
	if len(msgs) != 3 || msgs[0].ID != "1-0" || msgs[2].ID != "3-0" {
		t.Fatalf("stream entries %v, want IDs 1-0..3-0", msgs)
	}
	if got := readAll(t, ss, "fresh"); got != "one two three" {
		t.Fatalf("read %q", got)
	}

	// The same records as an earlier runhub kept them: a list.
	if _, _, err := ss.CreateStream(ctx, "old", journal.StreamCreate{ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.AppendStream(ctx, "old", journal.StreamAppend{ContentType: "text/plain", Data: []byte("earlier ")}); err != nil {
		t.Fatal(err)
	}
	om, _ := StreamStore{s}.LoadStream(ctx, "old")
	xkey, lkey := s.k.streamLog("old", om.Gen), s.k.streamRecords("old", om.Gen)
	for _, e := range s.rdb.XRange(ctx, xkey, "-", "+").Val() {
		s.rdb.RPush(ctx, lkey, e.Values["d"])
	}
	s.rdb.Del(ctx, xkey)
	if _, err := ss.AppendStream(ctx, "old", journal.StreamAppend{ContentType: "text/plain", Data: []byte("and later")}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ss, "old"); got != "earlier and later" {
		t.Fatalf("a list generation reads %q", got)
	}
	if n := s.rdb.LLen(ctx, lkey).Val(); n != 2 || s.rdb.Exists(ctx, xkey).Val() != 0 {
		t.Fatalf("a list generation: %d list elements, stream key exists %d; want 2 and none", n, s.rdb.Exists(ctx, xkey).Val())
	}
	if err := ss.DeleteStream(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if err := ss.DeleteStream(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if n := s.rdb.Exists(ctx, lkey, key).Val(); n != 0 {
		t.Fatalf("%d record keys left after the deletes", n)
	}
}
