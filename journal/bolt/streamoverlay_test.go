package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// noCheckpoint: the overlay reaches bbolt only with a transaction of
// another write, a compaction or Close.
func noCheckpoint() Options {
	var o Options
	o.checkpoint.entries, o.checkpoint.every = 1<<30, time.Hour
	return o
}

func bboltWrites(s *Store) int64 { st := s.db.Stats(); return st.TxStats.GetWrite() }

func producerAppend(t testing.TB, ss journal.Streams, name string, seq uint64) journal.StreamAppendResult {
	t.Helper()
	res, err := ss.AppendStream(context.Background(), name, journal.StreamAppend{ContentType: "text/plain",
		Data: []byte(fmt.Sprintf("[%d]", seq)), Producer: &journal.ProducerTuple{ID: "p", Seq: seq}})
	if err != nil {
		t.Fatalf("append %d: %v", seq, err)
	}
	return res
}

func seqText(from, to uint64) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "[%d]", i)
	}
	return b.String()
}

// A stream's create and appends commit in the event log alone (bbolt
// writes nothing, and each append costs the log one fdatasync); a crash
// before anything reached bbolt loses no acknowledged append: recovery
// replays them, producer state included, and writes them to bbolt, once
// (reopening again changes nothing).
func TestOverlay_AppendsInTheLogAloneReplayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, noCheckpoint())
	defer s.Close()
	ss := s.Streams(journal.StreamLimits{})
	ctx := context.Background()
	writes, syncs := bboltWrites(s), s.log.syncs.Load()
	if _, _, err := ss.CreateStream(ctx, "ov", journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	for seq := range uint64(30) {
		producerAppend(t, ss, "ov", seq)
	}
	if got := bboltWrites(s) - writes; got != 0 {
		t.Fatalf("a create and 30 appends wrote bbolt %d times", got)
	}
	if got := s.log.syncs.Load() - syncs; got != 31 {
		t.Fatalf("a create and 30 sequential appends: %d fdatasyncs of the log, want 31", got)
	}
	if got := readText(t, ss, "ov"); got != seqText(0, 29) {
		t.Fatalf("before the crash: %q", got)
	}

	crash := copyJournal(t, path, t.TempDir()) // the files as a SIGKILL leaves them
	for round := range 3 {
		c := mustOpen(t, crash, noCheckpoint())
		cs := c.Streams(journal.StreamLimits{})
		if got := readText(t, cs, "ov"); got != seqText(0, 29) {
			t.Fatalf("open %d after the crash: %q", round+1, got)
		}
		if !c.overlay.empty() {
			t.Fatalf("open %d: recovery left the overlay for bbolt", round+1)
		}
		if round == 2 {
			if res := producerAppend(t, cs, "ov", 29); !res.Duplicate {
				t.Fatal("the producer's retry of its last append after the crash was appended again")
			}
			producerAppend(t, cs, "ov", 30)
			if got := readText(t, cs, "ov"); got != seqText(0, 30) {
				t.Fatalf("after the retry: %q", got)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A commit torn before its meta record (a crash inside the batch's write:
// never acknowledged) is not replayed; the commits before it are.
func TestOverlay_TornCommitNotReplayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, noCheckpoint())
	ss := s.Streams(journal.StreamLimits{})
	ctx := context.Background()
	if _, _, err := ss.CreateStream(ctx, "torn", journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	for seq := range uint64(3) {
		producerAppend(t, ss, "torn", seq)
	}
	m, err := StreamStore{s}.LoadStream(ctx, "torn")
	if err != nil {
		t.Fatal(err)
	}
	crash := copyJournal(t, path, t.TempDir())
	s.Close()
	segs := segFiles(t, crash)
	b, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for size < len(b) {
		_, n, ok := frame(b[size:])
		if !ok {
			break
		}
		size += n
	}
	// The next commit's record, whole, and no meta record after it.
	rec := appendStreamRecord(nil, "torn", m.Gen, journal.StreamRecord{Index: 4, End: m.Bytes + 5, Data: []byte("lost!")})
	if err := os.WriteFile(segs[len(segs)-1], append(b[:size], rec...), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, crash, noCheckpoint())
	cs := c.Streams(journal.StreamLimits{})
	if got := readText(t, cs, "torn"); got != seqText(0, 2) {
		t.Fatalf("after the torn commit: %q", got)
	}
	producerAppend(t, cs, "torn", 3)
	if got := readText(t, cs, "torn"); got != seqText(0, 3) {
		t.Fatalf("the next append: %q", got)
	}
	if err := c.Close(); err != nil { // which checkpoints
		t.Fatal(err)
	}
	c = mustOpen(t, crash, noCheckpoint())
	defer c.Close()
	n := 0
	c.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketStreamIndex).ForEach(func(_, _ []byte) error { n++; return nil })
	})
	if n != 4 {
		t.Fatalf("%d index entries, want 4", n)
	}
}

// Readers that race checkpoints (every 8 entries here) read every record
// once, in order: the overlay's entries move to bbolt under them.
func TestOverlay_ReadsRaceCheckpoints(t *testing.T) {
	opts := Options{NoSync: true}
	opts.checkpoint.entries, opts.checkpoint.every = 8, time.Hour
	s := mustOpen(t, filepath.Join(t.TempDir(), "journal.db"), opts)
	defer s.Close()
	ss := s.Streams(journal.StreamLimits{})
	ctx := context.Background()
	if _, _, err := ss.CreateStream(ctx, "race", journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	const n = 400
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got := readText(t, ss, "race")
				if !strings.HasPrefix(seqText(0, n-1), got) {
					t.Errorf("a read raced a checkpoint and got %q…", got[:min(len(got), 60)])
					return
				}
			}
		})
	}
	for seq := range uint64(n) {
		producerAppend(t, ss, "race", seq)
	}
	close(done)
	wg.Wait()
	if got := readText(t, ss, "race"); got != seqText(0, n-1) {
		t.Fatalf("at the end: %q", got)
	}
}
