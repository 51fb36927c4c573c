package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runhub/runhub/journal"
)

// Concurrent commits grouped into shared transactions answer each alone:
// of 32 racing creations of one name one wins and the others lose their
// compare-and-set, while the 32 creations of other names racing with them
// all commit, whatever transaction they share.
func TestStreamCommits_GroupedAnswerAlone(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "journal.db"), Options{})
	defer s.Close()
	ss := StreamStore{s}
	ctx := context.Background()
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "shared"
			if i%2 == 1 {
				name = fmt.Sprint("own-", i)
			}
			m := journal.StreamMeta{Version: 1, Gen: fmt.Sprint("g", i), ContentType: "text/plain", Records: 1, Bytes: 1}
			err := ss.CommitStream(ctx, name, 0, m, []journal.StreamRecord{{Index: 1, End: 1, Data: []byte{byte(i)}}})
			switch {
			case err == nil && name == "shared":
				won.Add(1)
			case errors.Is(err, journal.ErrConflict) && name == "shared":
				lost.Add(1)
			case err != nil:
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 31 {
		t.Fatalf("one name created by %d and refused to %d of 32", won.Load(), lost.Load())
	}
	for i := 1; i < 64; i += 2 {
		name := fmt.Sprint("own-", i)
		m, err := ss.LoadStream(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		recs, err := ss.StreamRecords(ctx, name, m.Gen, 1, 1)
		if err != nil || len(recs) != 1 || recs[0].Data[0] != byte(i) {
			t.Fatalf("%s's record: %v %v", name, recs, err)
		}
	}
	if err := ss.DropStream(ctx, "missing", 1); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("drop of a missing stream: %v", err)
	}
}
