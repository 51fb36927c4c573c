package bolt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A writer that waits for each append before the next is never paced by
// GroupCommit.Interval: nothing queues while its commit runs. With an
// interval of an hour, a paced append would not return within the test.
func TestInterval_SequentialWriterIsNotPaced(t *testing.T) {
	s := mustOpen(t, t.TempDir()+"/journal.db", Options{GroupCommit: GroupCommit{Interval: time.Hour}})
	defer s.Close()
	mustBegin(t, s, "s1", "r1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 1; i <= 100; i++ {
		e, err := s.Append(ctx, tokenEvent(t, "s1", "r1", "t"+strconv.Itoa(i)), "")
		if err != nil || e.Seq != uint64(i) {
			t.Fatalf("append t%d: seq %d, %v (paced?)", i, e.Seq, err)
		}
	}
	checkRun(t, s, "r1", 100, true)
}

// Many runs appending at once share commits: once writes queue during a
// commit, the next starts Interval after the previous one and takes what
// queued meanwhile. The same arrivals without an interval commit nearly
// one by one. Every event lands, in order, once. The log's fdatasync takes
// at least a millisecond here, as on a disk (on tmpfs it costs nothing,
// nothing would ever queue, and there would be nothing to save).
func TestInterval_ConcurrentWritersShareCommits(t *testing.T) {
	unpaced := spreadAppends(t, 0)
	paced := spreadAppends(t, 40*time.Millisecond)
	t.Logf("fdatasyncs: %d without an interval, %d with 40ms", unpaced, paced)
	if paced*3 > unpaced {
		t.Fatalf("%d fdatasyncs with Interval 40ms against %d without; want at most a third", paced, unpaced)
	}
}

// spreadAppends has 100 runs append one event each, at times spread over
// about 100 ms, and returns the fdatasyncs they took.
func spreadAppends(t *testing.T, interval time.Duration) int64 {
	const runs = 100
	s := mustOpen(t, t.TempDir()+"/journal.db", Options{GroupCommit: GroupCommit{Interval: interval}})
	defer s.Close()
	for r := range runs {
		mustBegin(t, s, "s"+strconv.Itoa(r), "r"+strconv.Itoa(r))
	}
	// Set while the committer waits; the next write's queueing orders it
	// before the committer's next read.
	s.log.syncFile = func(f *os.File) error {
		time.Sleep(time.Millisecond)
		return fdatasync(f)
	}
	base := syncs(s)
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid, rid := "s"+strconv.Itoa(r), "r"+strconv.Itoa(r)
			time.Sleep(time.Duration(rand.IntN(100_000)) * time.Microsecond)
			e, err := s.Append(context.Background(), tokenEvent(t, sid, rid, "t1"), "")
			if err != nil || e.Seq != 1 {
				errs <- fmt.Errorf("%s append: seq %d, %v", rid, e.Seq, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := syncs(s) - base
	for r := range runs {
		checkRun(t, s, "r"+strconv.Itoa(r), 1, true)
	}
	return n
}
