package journaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
)

// RunStreams runs the durable streams' conformance subtests against b,
// whose stores must be journal.StreamHolders.
func RunStreams(t *testing.T, b Backend) {
	for _, st := range append(streamTests, docTests...) {
		t.Run(st.name, func(t *testing.T) { st.fn(t, b) })
	}
}

var streamSeq atomic.Int64

func streamName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), streamSeq.Add(1))
}

func openStreams(t testing.TB, b Backend, l journal.StreamLimits) (journal.Store, journal.Streams) {
	s := b.Open(t)
	h, ok := s.(journal.StreamHolder)
	if !ok {
		t.Fatalf("%T holds no streams", s)
	}
	return s, h.Streams(l)
}

// kindOf is err's StreamErrKind (0 when it is none).
func kindOf(err error) journal.StreamErrKind {
	var se *journal.StreamError
	if errors.As(err, &se) {
		return se.Kind
	}
	return 0
}

func mustCreate(t testing.TB, ss journal.Streams, name string, c journal.StreamCreate) journal.StreamInfo {
	t.Helper()
	info, created, err := ss.CreateStream(context.Background(), name, c)
	if err != nil || !created {
		t.Fatalf("CreateStream(%s) = created %v, %v", name, created, err)
	}
	return info
}

func mustAppend(t testing.TB, ss journal.Streams, name string, a journal.StreamAppend) journal.StreamAppendResult {
	t.Helper()
	res, err := ss.AppendStream(context.Background(), name, a)
	if err != nil {
		t.Fatalf("AppendStream(%s, %q): %v", name, a.Data, err)
	}
	return res
}

// readAll reads the whole stream, a record at a time when maxBytes is 1.
func readAll(t testing.TB, ss journal.Streams, name string, maxBytes int) string {
	t.Helper()
	var out []byte
	var after uint64
	for {
		r, err := ss.ReadStream(context.Background(), name, after, maxBytes, false)
		if err != nil {
			t.Fatalf("ReadStream(%s, %d): %v", name, after, err)
		}
		if len(r.Records) == 0 {
			return string(out)
		}
		for _, rec := range r.Records {
			out = append(out, rec.Data...)
			after = rec.Index
		}
	}
}

var text = "text/plain"

var streamTests = []subtest{
	{"CreateIdempotentAndConflict", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		ctx := context.Background()
		n := streamName("create")
		mustCreate(t, ss, n, journal.StreamCreate{Owner: "alice", ContentType: text, TTL: 60, HasTTL: true})
		if _, created, err := ss.CreateStream(ctx, n, journal.StreamCreate{Owner: "alice", ContentType: "TEXT/PLAIN", TTL: 60, HasTTL: true}); err != nil || created {
			t.Fatalf("same config again: created %v, %v; want found", created, err)
		}
		if _, _, err := ss.CreateStream(ctx, n, journal.StreamCreate{ContentType: text, TTL: 61, HasTTL: true}); kindOf(err) != journal.StreamConfigConflict {
			t.Fatalf("other TTL: %v, want StreamConfigConflict", err)
		}
		if _, err := ss.StreamHead(ctx, streamName("missing")); kindOf(err) != journal.StreamNotFound {
			t.Fatalf("head of a missing stream: %v", err)
		}
	}},
	{"AppendReadOrder", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		n := streamName("append")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text, Initial: &journal.StreamRecord{Data: []byte("a")}})
		for _, d := range []string{"b", "c", "d"} {
			mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte(d)})
		}
		if got := readAll(t, ss, n, 1); got != "abcd" {
			t.Fatalf("read %q, want abcd", got)
		}
		r, err := ss.ReadStream(context.Background(), n, 2, 0, false)
		if err != nil || len(r.Records) != 2 || string(r.Records[0].Data) != "c" || r.Meta.Records != 4 || r.Meta.Bytes != 4 {
			t.Fatalf("read after 2: %+v, %v", r, err)
		}
		if _, err := ss.ReadStream(context.Background(), n, 5, 0, false); kindOf(err) != journal.StreamBadOffset {
			t.Fatalf("read past the tail: %v", err)
		}
		if _, err := ss.AppendStream(context.Background(), n, journal.StreamAppend{ContentType: "application/json", Data: []byte("1")}); kindOf(err) != journal.StreamContentType {
			t.Fatalf("other content type: %v", err)
		}
	}},
	{"Producers", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		ctx := context.Background()
		n := streamName("producer")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text})
		p := func(e, s uint64) *journal.ProducerTuple { return &journal.ProducerTuple{ID: "p", Epoch: e, Seq: s} }
		mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("0"), Producer: p(0, 0)})
		mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("1"), Producer: p(0, 1)})
		if res := mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("x"), Producer: p(0, 0)}); !res.Duplicate || res.Seq != 1 {
			t.Fatalf("retry of seq 0: %+v, want a duplicate at seq 1", res)
		}
		_, err := ss.AppendStream(ctx, n, journal.StreamAppend{ContentType: text, Data: []byte("g"), Producer: p(0, 3)})
		var se *journal.StreamError
		if !errors.As(err, &se) || se.Kind != journal.ProducerGap || se.Expected != 2 || se.Received != 3 {
			t.Fatalf("gap: %v", err)
		}
		if _, err := ss.AppendStream(ctx, n, journal.StreamAppend{ContentType: text, Data: []byte("e"), Producer: p(1, 2)}); kindOf(err) != journal.ProducerBadSeq {
			t.Fatalf("new epoch at seq 2: %v", err)
		}
		mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("2"), Producer: p(1, 0)})
		if _, err := ss.AppendStream(ctx, n, journal.StreamAppend{ContentType: text, Data: []byte("z"), Producer: p(0, 2)}); !errors.As(err, &se) || se.Kind != journal.ProducerStale || se.Epoch != 1 {
			t.Fatalf("stale epoch: %v", err)
		}
		mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("s"), StreamSeq: "b"})
		if _, err := ss.AppendStream(ctx, n, journal.StreamAppend{ContentType: text, Data: []byte("t"), StreamSeq: "a"}); kindOf(err) != journal.StreamSeqConflict {
			t.Fatalf("Stream-Seq regression: %v", err)
		}
		if got := readAll(t, ss, n, 0); got != "012s" {
			t.Fatalf("read %q, want 012s", got)
		}
	}},
	{"ConcurrentProducerAppendsOnce", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		n := streamName("concurrent")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text})
		var wg sync.WaitGroup
		var dups atomic.Int32
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := ss.AppendStream(context.Background(), n, journal.StreamAppend{ContentType: text,
					Data: []byte(fmt.Sprint(i)), Producer: &journal.ProducerTuple{ID: "p", Seq: 0}})
				if err != nil {
					t.Errorf("append %d: %v", i, err)
				}
				if res.Duplicate {
					dups.Add(1)
				}
			}()
		}
		wg.Wait()
		if got := readAll(t, ss, n, 0); len(got) != 1 || dups.Load() != 7 {
			t.Fatalf("8 racing retries of one tuple stored %q with %d duplicates; want one append", got, dups.Load())
		}
	}},
	{"Close", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		ctx := context.Background()
		n := streamName("close")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text})
		tuple := &journal.ProducerTuple{ID: "p"}
		res := mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("end"), Close: true, Producer: tuple})
		if !res.Info.Meta.Closed {
			t.Fatal("not closed")
		}
		if res := mustAppend(t, ss, n, journal.StreamAppend{Close: true, Producer: tuple}); !res.Duplicate {
			t.Fatal("a retry of the closing append is no duplicate")
		}
		mustAppend(t, ss, n, journal.StreamAppend{Close: true}) // closing again: done
		if _, err := ss.AppendStream(ctx, n, journal.StreamAppend{ContentType: text, Data: []byte("x")}); kindOf(err) != journal.StreamClosed {
			t.Fatalf("append after close: %v", err)
		}
	}},
	{"ForkAndTombstone", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		ctx := context.Background()
		src, fork, fork2 := streamName("src"), streamName("fork"), streamName("fork2")
		mustCreate(t, ss, src, journal.StreamCreate{ContentType: text, Initial: &journal.StreamRecord{Data: []byte("hello")}})
		mustAppend(t, ss, src, journal.StreamAppend{ContentType: text, Data: []byte("world")})
		mustCreate(t, ss, fork, journal.StreamCreate{Fork: &journal.StreamFork{From: src, Offset: 0, HasOffset: true, Sub: 3}})
		mustAppend(t, ss, fork, journal.StreamAppend{ContentType: text, Data: []byte("LO")})
		if got := readAll(t, ss, fork, 0); got != "helLO" {
			t.Fatalf("fork reads %q, want helLO", got)
		}
		mustCreate(t, ss, fork2, journal.StreamCreate{ContentType: text, Fork: &journal.StreamFork{From: fork}})
		if _, _, err := ss.CreateStream(ctx, streamName("bad"), journal.StreamCreate{Fork: &journal.StreamFork{From: src, Offset: 9, HasOffset: true}}); kindOf(err) != journal.StreamBadOffset {
			t.Fatalf("fork past the tail: %v", err)
		}
		if err := ss.DeleteStream(ctx, fork); err != nil {
			t.Fatal(err)
		}
		if _, err := ss.StreamHead(ctx, fork); kindOf(err) != journal.StreamGone {
			t.Fatalf("deleted source of a living fork: %v, want StreamGone", err)
		}
		if got := readAll(t, ss, fork2, 0); got != "helLO" {
			t.Fatalf("fork of the fork reads %q", got)
		}
		if err := ss.DeleteStream(ctx, fork2); err != nil {
			t.Fatal(err)
		}
		if _, err := ss.StreamHead(ctx, fork); kindOf(err) != journal.StreamNotFound {
			t.Fatalf("tombstone after its last fork went: %v, want StreamNotFound", err)
		}
		if got := readAll(t, ss, src, 0); got != "helloworld" {
			t.Fatalf("source reads %q", got)
		}
	}},
	{"ExpiryAndReap", func(t *testing.T, b Backend) {
		now := time.Now()
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		_, ss := openStreams(t, b, journal.StreamLimits{Now: clock})
		ctx := context.Background()
		ttl, at, keep := streamName("ttl"), streamName("at"), streamName("keep")
		mustCreate(t, ss, ttl, journal.StreamCreate{ContentType: text, TTL: 2, HasTTL: true})
		mustCreate(t, ss, at, journal.StreamCreate{ContentType: text, ExpiresAt: now.Add(3 * time.Second).UnixMilli()})
		mustCreate(t, ss, keep, journal.StreamCreate{ContentType: text})
		mu.Lock()
		now = now.Add(1500 * time.Millisecond)
		mu.Unlock()
		if _, err := ss.ReadStream(ctx, ttl, 0, 0, true); err != nil { // slides the window
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(1500 * time.Millisecond)
		mu.Unlock()
		n, err := ss.ReapStreams(ctx, clock())
		if err != nil || n != 1 {
			t.Fatalf("reaped %d, %v; want the Expires-At one", n, err)
		}
		if _, err := ss.StreamHead(ctx, ttl); err != nil {
			t.Fatalf("TTL stream read 1.5 s ago: %v", err)
		}
		if _, err := ss.StreamHead(ctx, at); kindOf(err) != journal.StreamNotFound {
			t.Fatalf("expired stream: %v", err)
		}
		mu.Lock()
		now = now.Add(3 * time.Second)
		mu.Unlock()
		if _, err := ss.AppendStream(ctx, ttl, journal.StreamAppend{ContentType: text, Data: []byte("x")}); kindOf(err) != journal.StreamNotFound {
			t.Fatalf("append to an expired stream: %v", err)
		}
		if _, created, err := ss.CreateStream(ctx, ttl, journal.StreamCreate{ContentType: "application/json"}); err != nil || !created {
			t.Fatalf("re-create after expiry: %v %v", created, err)
		}
		if _, err := ss.StreamHead(ctx, keep); err != nil {
			t.Fatal(err)
		}
	}},
	{"BoundedSize", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{MaxStreamBytes: 10})
		n := streamName("bounded")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text, Initial: &journal.StreamRecord{Data: []byte("12345678")}})
		if _, err := ss.AppendStream(context.Background(), n, journal.StreamAppend{ContentType: text, Data: []byte("abc")}); kindOf(err) != journal.StreamTooLarge {
			t.Fatalf("append past the bound: %v", err)
		}
		if got := readAll(t, ss, n, 0); got != "12345678" {
			t.Fatalf("refused append changed the stream: %q", got)
		}
	}},
	{"Notify", func(t *testing.T, b Backend) {
		_, ss := openStreams(t, b, journal.StreamLimits{})
		n := streamName("notify")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text})
		ch := make(chan struct{}, 16)
		cancel := ss.SubscribeStream(n, func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		})
		defer cancel()
		mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("x")})
		select {
		case <-ch:
		case <-time.After(waitTimeout):
			t.Fatal("no notification of an append")
		}
	}},
	{"Durability", func(t *testing.T, b Backend) {
		s, ss := openStreams(t, b, journal.StreamLimits{})
		n := streamName("durable")
		mustCreate(t, ss, n, journal.StreamCreate{ContentType: text})
		mustAppend(t, ss, n, journal.StreamAppend{ContentType: text, Data: []byte("kept"), Producer: &journal.ProducerTuple{ID: "p"}})
		again := b.Reopen(t, s).(journal.StreamHolder).Streams(journal.StreamLimits{})
		if got := readAll(t, again, n, 0); got != "kept" {
			t.Fatalf("after reopen: %q", got)
		}
		if res := mustAppend(t, again, n, journal.StreamAppend{ContentType: text, Data: []byte("kept"), Producer: &journal.ProducerTuple{ID: "p"}}); !res.Duplicate {
			t.Fatal("a producer's retry after a reopen was appended again")
		}
	}},
}
