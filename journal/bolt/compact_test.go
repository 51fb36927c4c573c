package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

// Segments whose runs are all gone are dropped, and those that a
// long-lived run still holds a little of are compacted: with runs trimmed
// as they end, the log stays a few segments long however many runs came
// and went, and the long-lived run reads back whole, before and after a
// reopen. A crash before a dropped segment's file is gone (the drop of a
// dead segment, or of a compacted one whose copies are durable) leaves
// both: each round, the files the trim removed are put back in a copy of
// the journal, which must reopen with every event read once.
func TestSegments_DroppedAndCompacted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	opts := Options{NoSync: true, segmentBytes: 4 << 10}
	s := mustOpen(t, path, opts)
	defer func() { s.Close() }()
	mustBegin(t, s, "long", "keeper")
	kept, restored := 0, 0
	for round := range 40 {
		rid, sid := fmt.Sprint("r", round), fmt.Sprint("s", round)
		mustBegin(t, s, sid, rid)
		appendTokens(t, s, sid, rid, 1, 20)
		kept++
		appendTokens(t, s, "long", "keeper", kept, kept)
		done, _ := protocol.NewEvent(rid, sid, protocol.EventDone, protocol.DonePayload{Status: "completed"})
		if _, err := s.Append(ctx, done, ""); err != nil {
			t.Fatal(err)
		}
		pre := map[string][]byte{}
		for _, f := range segFiles(t, path) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pre[filepath.Base(f)] = b
		}
		if n, err := s.Trim(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("round %d: Trim = %d, %v", round, n, err)
		}
		// The next write runs the compaction the trim made due.
		kept++
		appendTokens(t, s, "long", "keeper", kept, kept)
		post := segFiles(t, path)
		var gone []string
		for name := range pre {
			if !slices.Contains(post, filepath.Join(EventsDir(path), name)) {
				gone = append(gone, name)
			}
		}
		if len(gone) == 0 {
			continue
		}
		crash := copyJournal(t, path, t.TempDir())
		for _, name := range gone {
			if err := os.WriteFile(filepath.Join(EventsDir(crash), name), pre[name], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c := mustOpen(t, crash, opts)
		checkRun(t, c, "keeper", kept, true)
		if _, err := c.Run(ctx, rid); err == nil {
			t.Fatalf("round %d: the trimmed run is back after the crash", round)
		}
		c.Close()
		restored++
	}
	if restored == 0 {
		t.Fatal("no segment was ever dropped")
	}
	// 40 rounds wrote ~80 KiB; what is left is bounded by what is live:
	// sealed segments hold at most compactRatio times their live bytes.
	var size, live uint64
	for _, seg := range s.log.segs[:len(s.log.segs)-1] {
		size += seg.size.Load()
		live += seg.liveBytes
	}
	if size > compactRatio*live+opts.segmentBytes || s.log.end() < 3*size {
		t.Fatalf("sealed segments hold %d bytes, %d of them live (of %d written)", size, live, s.log.end())
	}
	checkRun(t, s, "keeper", kept, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path, opts)
	checkRun(t, s, "keeper", kept, true)
}
