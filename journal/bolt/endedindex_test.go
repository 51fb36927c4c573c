package bolt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/protocol"
)

// endRun appends tokens t1..tn to a new run and its done event.
func endRun(t testing.TB, s *Store, sid, rid string, n int) {
	t.Helper()
	mustBegin(t, s, sid, rid)
	appendTokens(t, s, sid, rid, 1, n)
	done, _ := protocol.NewEvent(rid, sid, protocol.EventDone, protocol.DonePayload{Status: "completed"})
	if _, err := s.Append(context.Background(), done, ""); err != nil {
		t.Fatal(err)
	}
}

// checkEnded fails unless the ended run holds t1..tn and then its done.
func checkEnded(t testing.TB, s *Store, rid string, n int) {
	t.Helper()
	ctx := context.Background()
	m, err := s.Run(ctx, rid)
	if err != nil || m.LastSeq != uint64(n+1) || !m.Terminal || m.TerminalType != protocol.EventDone {
		t.Fatalf("run %s: last seq %d terminal %v %s, %v; want %d, ended by done", rid, m.LastSeq, m.Terminal, m.TerminalType, err, n+1)
	}
	got, err := s.Read(ctx, rid, 0, n+10)
	if err != nil || len(got) != n+1 {
		t.Fatalf("run %s: read %d events, %v; want %d", rid, len(got), err, n+1)
	}
	for i, e := range got[:n] {
		want := fmt.Sprintf(`{"message_id":"m","text":"t%d"}`, i+1)
		if e.Seq != uint64(i+1) || string(e.Payload) != want {
			t.Fatalf("run %s event %d: seq %d %s, want %s", rid, i, e.Seq, e.Payload, want)
		}
	}
	if got[n].Type != protocol.EventDone || !got[n].Terminal {
		t.Fatalf("run %s: last event %s, want done", rid, got[n].Type)
	}
}

// liveCounts is every segment's count of live records and their bytes.
func liveCounts(s *Store) map[uint64][2]uint64 {
	out := map[uint64][2]uint64{}
	for _, seg := range s.log.segs {
		out[seg.base] = [2]uint64{uint64(seg.live), seg.liveBytes}
	}
	return out
}

// asLayout3 makes the journal at path look as an earlier runhub left it:
// no index of ended runs, layout 3. Its next open recovers in full.
func asLayout3(t testing.TB, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketEndedOffs, bucketSegLive} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, be64(formatStreamLog))
	}); err != nil {
		t.Fatal(err)
	}
}

// The segments' live counts an open takes from segment_live and the
// active runs' records are the ones a full recovery of every record
// counts (the layout-3 open, which then writes the index of ended runs:
// the migration), and so are those of the migrated copy's next open. Runs end, are
// trimmed and deleted, a long-lived active run keeps segments partly
// live and compaction moves its records and ended runs' ones; every run
// reads back whole after each open.
func TestEndedIndex_CountsMatchAFullRecovery(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	opts := Options{NoSync: true, segmentBytes: 4 << 10}
	s := mustOpen(t, path, opts)
	defer func() { s.Close() }()
	mustBegin(t, s, "long", "keeper")
	kept := 0
	ended := map[string]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 30 {
		for i := range 5 {
			rid, sid := fmt.Sprint("r", round, "-", i), fmt.Sprint("s", round, "-", i)
			n := 1 + rng.IntN(15)
			endRun(t, s, sid, rid, n)
			ended[rid] = n
		}
		kept++
		appendTokens(t, s, "long", "keeper", kept, kept)
		switch round % 3 {
		case 0: // every ended run goes, on some rounds
			if round%6 != 0 {
				break
			}
			n, err := s.Trim(ctx, time.Now().Add(time.Hour))
			if err != nil || n != len(ended) {
				t.Fatalf("round %d: Trim = %d, %v; want %d", round, n, err, len(ended))
			}
			clear(ended)
		case 1: // a session of this round goes
			sid := fmt.Sprint("s", round, "-0")
			if err := s.DeleteSession(ctx, sid); err != nil {
				t.Fatal(err)
			}
			delete(ended, fmt.Sprint("r", round, "-0"))
		}
		if round%10 != 9 {
			continue
		}
		// Trims and deletions thin segments out: they are dropped or
		// compacted (the next write runs it).
		kept++
		appendTokens(t, s, "long", "keeper", kept, kept)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		full := copyJournal(t, path, t.TempDir())
		asLayout3(t, full)

		f := mustOpen(t, full, opts)
		running := liveCounts(f) // every record read: the truth
		s = mustOpen(t, path, opts)
		if got := liveCounts(s); fmt.Sprint(got) != fmt.Sprint(running) {
			t.Fatalf("round %d: live counts after the open %v, a full recovery's %v", round, got, running)
		}
		if len(s.index) != 1 {
			t.Fatalf("round %d: %d runs indexed at open, want the active one", round, len(s.index))
		}
		if fm, _ := formatOf(t, f); fm != formatEndedIndex {
			t.Fatalf("round %d: layout %d after the migration", round, fm)
		}
		for _, st := range []*Store{s, f} {
			checkRun(t, st, "keeper", kept, true)
			for rid, n := range ended {
				checkEnded(t, st, rid, n)
			}
		}
		f.Close()
		// The migrated copy opens again from its index of ended runs.
		f = mustOpen(t, full, opts)
		if got := liveCounts(f); fmt.Sprint(got) != fmt.Sprint(running) {
			t.Fatalf("round %d: live counts of the migrated copy reopened %v, want %v", round, got, running)
		}
		f.Close()
	}
}

// An open reads the log from the earliest active run's birth: the
// segment it was born in and the ones after, however many ended runs
// the segments before hold; a full recovery (layout 3) reads them all.
func TestEndedIndex_OpenReadsFromTheActiveRuns(t *testing.T) {
	opts := Options{NoSync: true, segmentBytes: 4 << 10}
	for _, runs := range []int{100, 1000} {
		path := filepath.Join(t.TempDir(), "journal.db")
		s := mustOpen(t, path, opts)
		for i := range runs {
			endRun(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i), 3)
		}
		mustBegin(t, s, "live", "now")
		appendTokens(t, s, "live", "now", 1, 3)
		s.Close()
		full := copyJournal(t, path, t.TempDir())
		asLayout3(t, full)

		// The active run's records are in the last segment or the two
		// last (a batch that filled one starts the next); an open reads
		// those and no other.
		segs := segFiles(t, path)
		most := 0
		for _, f := range segs[max(0, len(segs)-2):] {
			starts, _ := recordStarts(t, f)
			most += len(starts)
		}
		s = mustOpen(t, path, opts)
		if s.recovered > most || len(segs) < 4 {
			t.Fatalf("%d runs: the open read %d records, want at most the %d of the last 2 of %d segments", runs, s.recovered, most, len(segs))
		}
		checkRun(t, s, "now", 3, true)
		checkEnded(t, s, "r0", 3)
		checkEnded(t, s, fmt.Sprint("r", runs-1), 3)
		if len(s.index) != 1 || len(s.ended.m) != 2 {
			t.Fatalf("%d runs: %d active and %d ended runs in memory, want 1 and the 2 read", runs, len(s.index), len(s.ended.m))
		}
		s.Close()
		f := mustOpen(t, full, opts)
		if f.recovered < runs*5 {
			t.Fatalf("%d runs: a full recovery read %d records, want every one (≥ %d)", runs, f.recovered, runs*5)
		}
		f.Close()
	}
}

// The cache of ended runs' entries stays within its bounds however many
// are read, and drops none that a later read needs: each is read again
// from bbolt.
func TestEndedIndex_CacheBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{NoSync: true})
	defer s.Close()
	const maxRuns, runs = 40, 100
	s.idxMu.Lock()
	s.ended.maxRuns, s.ended.maxBytes = maxRuns, 64<<10
	s.idxMu.Unlock()
	for i := range runs {
		endRun(t, s, fmt.Sprint("s", i), fmt.Sprint("r", i), 1)
	}
	for round := range 2 {
		for i := range runs {
			checkEnded(t, s, fmt.Sprint("r", i), 1)
		}
		s.idxMu.RLock()
		n, bytes := len(s.ended.m), s.ended.bytes
		s.idxMu.RUnlock()
		if n != maxRuns || bytes > 64<<10 {
			t.Fatalf("round %d: %d ended runs (%d bytes) cached, bounds %d and %d", round, n, bytes, maxRuns, 64<<10)
		}
	}
}

// Compaction moves the records of ended runs that a thinned segment
// still holds, in a transaction that points their index in bbolt at the
// copies; readers reading them meanwhile, from the cache or from bbolt,
// always read them whole, and so does the next open.
func TestEndedIndex_CompactionMovesEndedRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	opts := Options{NoSync: true, segmentBytes: 4 << 10}
	s := mustOpen(t, path, opts)
	defer func() { s.Close() }()
	var keep []string
	for round := range 20 {
		rid := fmt.Sprint("keep", round)
		endRun(t, s, fmt.Sprint("k", round), rid, 2)
		keep = append(keep, rid)
		for i := range 4 {
			endRun(t, s, fmt.Sprint("g", round, "-", i), fmt.Sprint("gone", round, "-", i), 10)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rid := keep[i%len(keep)]
				if i%7 == 0 { // sometimes from bbolt, not the cache
					s.idxMu.Lock()
					s.ended.remove(rid)
					s.idxMu.Unlock()
				}
				got, err := s.Read(ctx, rid, 0, 10)
				if err != nil || len(got) != 3 || got[0].Seq != 1 || got[2].Type != protocol.EventDone {
					errs <- fmt.Errorf("read %s: %d events, %v", rid, len(got), err)
					return
				}
			}
		}()
	}
	firstOff := func() map[string]uint64 {
		out := map[string]uint64{}
		s.log.mu.RLock()
		defer s.log.mu.RUnlock()
		for _, rid := range keep {
			e, err := s.lookup(rid)
			if err != nil || e == nil {
				t.Fatalf("%s: %v", rid, err)
			}
			s.idxMu.RLock()
			out[rid] = e.offs.at(1)
			s.idxMu.RUnlock()
		}
		return out
	}
	before := firstOff()
	var moved int
	for round := range 20 {
		for i := range 4 {
			if err := s.DeleteSession(ctx, fmt.Sprint("g", round, "-", i)); err != nil {
				t.Fatal(err)
			}
		}
		// A write runs the compaction the deletions made due.
		endRun(t, s, fmt.Sprint("w", round), fmt.Sprint("w", round), 1)
		s.log.mu.RLock()
		if s.log.segs[0].base > 0 {
			moved++
		}
		s.log.mu.RUnlock()
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if moved == 0 {
		t.Fatal("no segment was compacted or dropped")
	}
	relocated := 0
	for rid, off := range firstOff() {
		if off != before[rid] {
			relocated++
		}
	}
	if relocated == 0 {
		t.Fatal("compaction moved no ended run's records")
	}
	s.Close()
	full := copyJournal(t, path, t.TempDir())
	asLayout3(t, full)
	f := mustOpen(t, full, opts)
	defer f.Close()
	s = mustOpen(t, path, opts)
	if got, want := liveCounts(s), liveCounts(f); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("live counts after the open %v, a full recovery's %v", got, want)
	}
	for _, rid := range keep {
		checkEnded(t, s, rid, 2)
	}
	for round := range 20 {
		if _, err := s.Run(ctx, fmt.Sprint("gone", round, "-0")); err == nil {
			t.Fatalf("round %d: a deleted run is back", round)
		}
	}
}

// boundaryFrom starts at from when it is the log end or a whole record
// starts there, walks the records' lengths to the first record past it
// otherwise, and stops the walk at a length that leads nowhere.
func TestBoundaryFrom(t *testing.T) {
	var seg []byte
	var starts []uint64
	for i := range 4 {
		starts = append(starts, uint64(len(seg)))
		seg = appendEventRecord(seg, recEvent, "", &protocol.Envelope{RunID: "r", SessionID: "s", Seq: uint64(i + 1), Type: protocol.EventTokenDelta, Payload: []byte(`{"text":"abc"}`)})
	}
	end := uint64(len(seg))
	padded := append(append([]byte(nil), seg...), make([]byte, 64)...)
	const base = 1000
	cases := []struct {
		name         string
		b            []byte
		from, logEnd uint64
		want         uint64
	}{
		{"before the segment", seg, 10, 10, 0},
		{"a record's start", seg, base + starts[2], base + end, starts[2]},
		{"the log end, at the records' end", padded, base + end, base + end, end},
		{"inside a record: the next one", seg, base + starts[1] + 3, base + end, starts[2]},
		{"inside the last record: past it", padded, base + starts[3] + 1, base + end + 8, end},
	}
	for _, c := range cases {
		if got := boundaryFrom(c.b, base, c.from, c.logEnd); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	// A length that leads past the segment stops the walk there.
	bad := append([]byte(nil), seg...)
	bad[starts[1]] = 0xff
	bad[starts[1]+1] = 0xff
	if got := boundaryFrom(bad, base, base+starts[2]+1, base+end); got != starts[1] {
		t.Errorf("a bad length: %d, want %d", got, starts[1])
	}
}
