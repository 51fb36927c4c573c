package journaltest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
)

// docTests check journal.Docs (the subscriptions' state): a document is
// changed only by compare-and-set of its version, survives a reopen, and
// its changes are announced.
var docTests = []subtest{
	{"DocsCompareAndSet", func(t *testing.T, b Backend) {
		s := b.Open(t)
		dh, ok := s.(journal.DocHolder)
		if !ok {
			t.Fatalf("%T keeps no documents", s)
		}
		d := dh.Docs()
		ctx := context.Background()
		name := streamName("__ds/doc")
		if _, _, err := d.LoadDoc(ctx, name); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("LoadDoc of a missing document = %v, want ErrNotFound", err)
		}
		var seen atomic.Int32
		cancel := d.WatchDoc(name, func() { seen.Add(1) })
		defer cancel()
		v1, err := d.PutDoc(ctx, name, 0, []byte(`{"a":1}`))
		if err != nil || v1 == 0 {
			t.Fatalf("PutDoc(new) = %d, %v", v1, err)
		}
		if _, err := d.PutDoc(ctx, name, 0, []byte(`{"a":2}`)); !errors.Is(err, journal.ErrConflict) {
			t.Fatalf("PutDoc over an existing document with version 0 = %v, want ErrConflict", err)
		}
		v2, err := d.PutDoc(ctx, name, v1, []byte(`{"a":3}`))
		if err != nil || v2 <= v1 {
			t.Fatalf("PutDoc(v%d) = %d, %v", v1, v2, err)
		}
		if _, err := d.PutDoc(ctx, name, v1, []byte(`{"a":4}`)); !errors.Is(err, journal.ErrConflict) {
			t.Fatalf("PutDoc with a stale version = %v, want ErrConflict", err)
		}
		if _, err := d.PutDoc(ctx, name, v2, []byte(`not json`)); err == nil {
			t.Fatal("PutDoc of a document that is not JSON succeeded")
		}
		raw, v, err := d.LoadDoc(ctx, name)
		if err != nil || v != v2 || string(raw) != `{"a":3}` {
			t.Fatalf("LoadDoc = %s v%d, %v; want {\"a\":3} v%d", raw, v, err, v2)
		}
		deadline := time.Now().Add(5 * time.Second)
		for seen.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if seen.Load() == 0 {
			t.Fatal("WatchDoc saw no change")
		}
		if b.Reopen != nil {
			s = b.Reopen(t, s)
			d = s.(journal.DocHolder).Docs()
			if raw, v, err := d.LoadDoc(ctx, name); err != nil || v != v2 || string(raw) != `{"a":3}` {
				t.Fatalf("LoadDoc after a reopen = %s v%d, %v", raw, v, err)
			}
		}
		if err := d.DeleteDoc(ctx, name, v1); !errors.Is(err, journal.ErrConflict) {
			t.Fatalf("DeleteDoc with a stale version = %v, want ErrConflict", err)
		}
		if err := d.DeleteDoc(ctx, name, v2); err != nil {
			t.Fatalf("DeleteDoc = %v", err)
		}
		if _, _, err := d.LoadDoc(ctx, name); !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("LoadDoc after DeleteDoc = %v, want ErrNotFound", err)
		}
		if _, err := d.PutDoc(ctx, name, 0, []byte(`{"again":true}`)); err != nil {
			t.Fatalf("PutDoc after DeleteDoc = %v", err)
		}
	}},
}
