package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
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

// appendText appends text to the text/plain stream name.
func appendText(t testing.TB, ss journal.Streams, name, text string) {
	t.Helper()
	if _, err := ss.AppendStream(context.Background(), name, journal.StreamAppend{ContentType: "text/plain", Data: []byte(text)}); err != nil {
		t.Fatalf("append to %s: %v", name, err)
	}
}

// readText reads the stream name whole.
func readText(t testing.TB, ss journal.Streams, name string) string {
	t.Helper()
	var out []byte
	var after uint64
	for {
		r, err := ss.ReadStream(context.Background(), name, after, 1<<20, false)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
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

func fileHas(t testing.TB, path, needle string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(needle))
}

// A stream's data is in the event log, not in bbolt, and reads back the
// same after a reopen: the sealed segments that hold only stream records
// are live, counted as they were.
func TestStreams_DataInTheEventLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	opts := Options{segmentBytes: 4 << 10}
	s := mustOpen(t, path, opts)
	ss := s.Streams(journal.StreamLimits{})
	ctx := context.Background()
	if _, _, err := ss.CreateStream(ctx, "logged", journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	want := ""
	for i := range 20 {
		part := fmt.Sprintf("needle-%02d;%s", i, strings.Repeat("n", 300))
		appendText(t, ss, "logged", part)
		want += part
	}
	if got := readText(t, ss, "logged"); got != want {
		t.Fatalf("read %q, want %q", got, want)
	}
	liveOf := func(s *Store) []string {
		var out []string
		for _, seg := range s.log.segs {
			out = append(out, fmt.Sprintf("%s:%d/%d", segName(seg.base), seg.live, seg.liveBytes))
		}
		return out
	}
	live := liveOf(s)
	if len(live) < 2 {
		t.Fatalf("the stream filled %d segments; the test wants sealed ones", len(live))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fileHas(t, path, "needle-07;") {
		t.Fatal("the stream's data is in the bbolt file")
	}
	inLog := false
	for _, f := range segFiles(t, path) {
		inLog = inLog || fileHas(t, f, "needle-07;")
	}
	if !inLog {
		t.Fatal("the stream's data is in no segment of the event log")
	}
	s = mustOpen(t, path, opts)
	defer s.Close()
	if got := readText(t, s.Streams(journal.StreamLimits{}), "logged"); got != want {
		t.Fatalf("after a reopen: %q, want %q", got, want)
	}
	if got := liveOf(s); fmt.Sprint(got) != fmt.Sprint(live) {
		t.Fatalf("live records by segment after a reopen: %v, before %v", got, live)
	}
}

// A segment a deleted stream held is dropped; one that holds a little of
// a live stream among dead run events is compacted, the stream's records
// copied forward and its index pointed at them, before and after a
// reopen.
func TestStreams_SegmentsDroppedAndCompacted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	opts := Options{NoSync: true, segmentBytes: 4 << 10}
	s := mustOpen(t, path, opts)
	defer func() { s.Close() }()
	ss := s.Streams(journal.StreamLimits{})
	for _, name := range []string{"kept", "dropped"} {
		if _, _, err := ss.CreateStream(ctx, name, journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
			t.Fatal(err)
		}
	}
	kept := ""
	for round := range 30 {
		rid, sid := fmt.Sprint("r", round), fmt.Sprint("s", round)
		mustBegin(t, s, sid, rid)
		appendTokens(t, s, sid, rid, 1, 20)
		part := fmt.Sprintf("k%02d;", round)
		appendText(t, ss, "kept", part)
		kept += part
		appendText(t, ss, "dropped", strings.Repeat("d", 300))
		done, _ := protocol.NewEvent(rid, sid, protocol.EventDone, protocol.DonePayload{Status: "completed"})
		if _, err := s.Append(ctx, done, ""); err != nil {
			t.Fatal(err)
		}
	}
	before := len(segFiles(t, path))
	if err := ss.DeleteStream(ctx, "dropped"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Trim(ctx, time.Now().Add(time.Hour)); err != nil || n != 30 {
		t.Fatalf("Trim = %d, %v", n, err)
	}
	// Each write runs one compaction the deletions made due.
	for i := range 3 * before {
		part := fmt.Sprintf("m%02d;", i)
		appendText(t, ss, "kept", part)
		kept += part
	}
	after := segFiles(t, path)
	if len(after) >= before/2 {
		t.Fatalf("%d segments before the deletions, %d after", before, len(after))
	}
	var size, live uint64
	for _, seg := range s.log.segs[:len(s.log.segs)-1] {
		size += seg.size.Load()
		live += seg.liveBytes
	}
	if size > compactRatio*live+opts.segmentBytes {
		t.Fatalf("sealed segments hold %d bytes, %d of them live", size, live)
	}
	if got := readText(t, ss, "kept"); got != kept {
		t.Fatalf("the kept stream reads %q, want %q", got, kept)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path, opts)
	if got := readText(t, s.Streams(journal.StreamLimits{}), "kept"); got != kept {
		t.Fatalf("after a reopen the kept stream reads %q, want %q", got, kept)
	}
}

// A record past the log's bound is refused, and nothing is written.
func TestStreams_RecordPastTheBound(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "journal.db"), Options{NoSync: true})
	defer s.Close()
	ss := StreamStore{s}
	m := journal.StreamMeta{Version: 1, Gen: "g", ContentType: "application/octet-stream"}
	err := ss.CommitStream(context.Background(), "big", 0, m, []journal.StreamRecord{{Index: 1, End: maxRecord, Data: make([]byte, maxRecord)}})
	if protocol.CodeOf(err) != protocol.CodeTooLarge {
		t.Fatalf("a record of %d bytes: %v", maxRecord, err)
	}
	if _, err := ss.LoadStream(context.Background(), "big"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("the refused commit left a stream: %v", err)
	}
}

// Stream data is written from where the append carried it, between the
// batch's records: batches that mix run events with stream records place
// both where their offsets say, before and after a reopen.
func TestStreams_DataBetweenEventsInABatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{NoSync: true})
	ctx := context.Background()
	ss := s.Streams(journal.StreamLimits{MaxStreamBytes: 1 << 30})
	var wg sync.WaitGroup
	for w := range 6 {
		name, sid, rid := fmt.Sprint("mix-", w), fmt.Sprint("ms", w), fmt.Sprint("mr", w)
		if _, _, err := ss.CreateStream(ctx, name, journal.StreamCreate{Owner: "o", ContentType: "text/plain"}); err != nil {
			t.Fatal(err)
		}
		mustBegin(t, s, sid, rid)
		wg.Go(func() {
			for i := range 40 {
				appendText(t, ss, name, fmt.Sprintf("%s:%02d:%s;", name, i, strings.Repeat("x", 1000+w)))
			}
		})
		wg.Go(func() { appendTokens(t, s, sid, rid, 1, 40) })
	}
	wg.Wait()
	check := func(s *Store) {
		t.Helper()
		ss := s.Streams(journal.StreamLimits{MaxStreamBytes: 1 << 30})
		for w := range 6 {
			name := fmt.Sprint("mix-", w)
			want := ""
			for i := range 40 {
				want += fmt.Sprintf("%s:%02d:%s;", name, i, strings.Repeat("x", 1000+w))
			}
			if got := readText(t, ss, name); got != want {
				t.Fatalf("%s reads %d bytes, want %d", name, len(got), len(want))
			}
			checkRun(t, s, fmt.Sprint("mr", w), 40, true)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path, Options{NoSync: true})
	defer s.Close()
	check(s)
}
