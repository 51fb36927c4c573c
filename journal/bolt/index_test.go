package bolt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

func TestExtents_RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var exts []extent
		seq, pos := uint64(rng.IntN(1000)+1), uint64(rng.IntN(1e6))
		for range rng.IntN(40) {
			e := extent{seq: seq, pos: pos, count: uint64(rng.IntN(50) + 1)}
			exts = append(exts, e)
			seq, pos = e.end(), e.pos+e.count+uint64(rng.IntN(500))
		}
		got, rest, err := decodeExtents(nil, appendExtents(nil, exts))
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(got, exts) && len(exts) > 0 {
			t.Fatalf("round trip of %v: %v, %v (rest %d)", exts, got, err, len(rest))
		}
	}
}

func TestAddExtent(t *testing.T) {
	var exts []extent
	for _, sp := range [][2]uint64{{1, 10}, {2, 11}, {3, 12}, {4, 20}, {5, 21}, {6, 30}} {
		exts = addExtent(exts, sp[0], sp[1])
	}
	want := []extent{{1, 10, 3}, {4, 20, 2}, {6, 30, 1}}
	if !reflect.DeepEqual(exts, want) {
		t.Fatalf("extents %v, want %v", exts, want)
	}
}

// Runs appended in turn, one event per batch, interleave in the log: a
// run's offsets jump from batch to batch. Every window reads back right, before
// and after a reopen, and Trim leaves nothing of them behind.
func TestStore_InterleavedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	ctx := context.Background()
	const runs, each = 4, 3*spillExtents + 7
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d", i)
		sid := "s" + ids[i]
		if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		if err := s.BeginRun(ctx, journal.RunMeta{ID: ids[i], SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	for n := range each {
		for _, id := range ids {
			e, _ := protocol.NewEvent(id, "s"+id, protocol.EventProgress, protocol.ProgressPayload{Text: fmt.Sprintf("%s-%d", id, n+1)})
			if _, err := s.Append(ctx, e, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string) {
		t.Helper()
		for _, id := range ids {
			for after := uint64(0); after <= each+1; after++ {
				for _, limit := range []int{1, 5, spillExtents + 1, 1000} {
					page, err := s.Read(ctx, id, after, limit)
					if err != nil {
						t.Fatalf("%s: Read(%s, %d, %d): %v", what, id, after, limit, err)
					}
					want := min(limit, max(0, each-int(after)))
					if len(page) != want {
						t.Fatalf("%s: Read(%s, %d, %d): %d events, want %d", what, id, after, limit, len(page), want)
					}
					for i, e := range page {
						seq := after + uint64(i) + 1
						if e.Seq != seq || string(e.Payload) != fmt.Sprintf(`{"text":"%s-%d"}`, id, seq) {
							t.Fatalf("%s: Read(%s, %d, %d)[%d] = seq %d %s", what, id, after, limit, i, e.Seq, e.Payload)
						}
					}
				}
			}
		}
	}
	check("before reopen")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	check("after reopen")

	for _, id := range ids {
		e, _ := protocol.NewEvent(id, "s"+id, protocol.EventCancelled, protocol.CancelledPayload{Reason: "x"})
		if _, err := s.Append(ctx, e, "k-"+id); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Trim(ctx, time.Now().Add(time.Hour)); err != nil || n != runs {
		t.Fatalf("Trim = %d, %v; want %d", n, err, runs)
	}
	// The file reopens after the trim (the free page list is rebuilt) and
	// takes new runs.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketRuns, bucketHeads, bucketActive, bucketEnded} {
			if n := tx.Bucket(b).Stats().KeyN; n != 0 {
				t.Errorf("bucket %s holds %d keys after trimming every run", b, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: "again", SessionID: "sr0"}); err != nil {
		t.Fatal(err)
	}
	e, _ := protocol.NewEvent("again", "sr0", protocol.EventProgress, protocol.ProgressPayload{Text: "x"})
	if got, err := s.Append(ctx, e, ""); err != nil || got.Seq != 1 {
		t.Fatalf("append after trim and reopen: %+v, %v", got, err)
	}
}
