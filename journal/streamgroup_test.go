package journal_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
)

// slowCommits counts the commits of a StreamStore and makes each take a
// while, as an fsync does, so that appends queue behind one.
type slowCommits struct {
	journal.StreamStore
	commits atomic.Int64
}

func (s *slowCommits) CommitStream(ctx context.Context, name string, prev uint64, next journal.StreamMeta, recs []journal.StreamRecord) error {
	s.commits.Add(1)
	time.Sleep(5 * time.Millisecond)
	return s.StreamStore.CommitStream(ctx, name, prev, next, recs)
}

// Concurrent appends to one stream share commits, and each is answered
// as if appended alone: its own offset, its data there, in an order the
// offsets agree with; an append its decision refuses (a producer's gap)
// fails alone, and a duplicate within the group is a duplicate.
func TestAppendStream_ConcurrentAppendsShareCommits(t *testing.T) {
	store := mem.New(mem.Options{})
	defer store.Close()
	st := &slowCommits{StreamStore: store.StreamStore()}
	ss := journal.NewStreams(st, journal.StreamLimits{})
	ctx := context.Background()
	if _, _, err := ss.CreateStream(ctx, "g", journal.StreamCreate{ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	const n = 60
	var wg sync.WaitGroup
	ends := make([]uint64, n)
	for i := range n {
		wg.Go(func() {
			res, err := ss.AppendStream(ctx, "g", journal.StreamAppend{ContentType: "text/plain", Data: []byte(fmt.Sprintf("<%02d>", i))})
			if err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			ends[i] = res.Info.Meta.Bytes
		})
	}
	// A producer's appends race in too: seq 0, its retry, and a gap.
	var gapErr, dupSeen atomic.Bool
	wg.Go(func() {
		p := func(seq uint64) (journal.StreamAppendResult, error) {
			return ss.AppendStream(ctx, "g", journal.StreamAppend{ContentType: "text/plain", Data: []byte("<pp>"), Producer: &journal.ProducerTuple{ID: "p", Seq: seq}})
		}
		if _, err := p(0); err != nil {
			t.Errorf("producer seq 0: %v", err)
		}
		var inner sync.WaitGroup
		inner.Go(func() {
			if res, err := p(0); err != nil || !res.Duplicate {
				t.Errorf("producer retry of seq 0: %+v %v", res, err)
			} else {
				dupSeen.Store(true)
			}
		})
		inner.Go(func() {
			if _, err := p(5); err == nil {
				t.Error("producer seq 5 after 0 was accepted")
			} else {
				gapErr.Store(true)
			}
		})
		inner.Wait()
	})
	wg.Wait()
	if c := st.commits.Load(); c >= n/2 {
		t.Errorf("%d appends took %d commits: appends waiting behind a commit did not share the next", n+1, c)
	}
	read, err := ss.ReadStream(ctx, "g", 0, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, r := range read.Records {
		all = append(all, r.Data...)
	}
	if len(all) != (n+1)*4 {
		t.Fatalf("the stream holds %d bytes, want %d: %s", len(all), (n+1)*4, all)
	}
	for i, end := range ends {
		if end < 4 || string(all[end-4:end]) != fmt.Sprintf("<%02d>", i) {
			t.Errorf("append %d was answered with offset %d, where the stream holds %q", i, end, all[max(int(end)-4, 0):end])
		}
	}
	if !gapErr.Load() || !dupSeen.Load() {
		t.Error("the producer's gap or duplicate was not answered as such")
	}
}
