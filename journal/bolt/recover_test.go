package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// copyJournal copies the journal file at src and its event log into dir
// and returns the copy's path.
func copyJournal(t testing.TB, src, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, filepath.Base(src))
	copyFile(t, src, dst)
	if err := os.MkdirAll(EventsDir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(EventsDir(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		copyFile(t, filepath.Join(EventsDir(src), e.Name()), filepath.Join(EventsDir(dst), e.Name()))
	}
	return dst
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// segFiles lists the segment files of the journal at path, oldest first.
func segFiles(t testing.TB, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(EventsDir(path), "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recordStarts returns the offsets of the records of a segment file.
func recordStarts(t testing.TB, file string) ([]int, int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int
	for off := 0; off < len(b); {
		_, n, ok := frame(b[off:])
		if !ok {
			t.Fatalf("%s: no whole record at %d", file, off)
		}
		starts = append(starts, off)
		off += n
	}
	return starts, len(b)
}

func tokenEvent(t testing.TB, sid, rid, text string) protocol.Envelope {
	t.Helper()
	e, err := protocol.NewEvent(rid, sid, protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustOpen(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func mustBegin(t testing.TB, s *Store, sid, rid string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Session(ctx, sid); errors.Is(err, journal.ErrNotFound) {
		if err := s.CreateSession(ctx, journal.SessionMeta{ID: sid, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.BeginRun(ctx, journal.RunMeta{ID: rid, SessionID: sid}); err != nil {
		t.Fatal(err)
	}
}

// checkRun fails unless the run holds exactly the tokens t1..tn (as
// appended by appendTokens) and is active or not as said.
func checkRun(t testing.TB, s *Store, rid string, n int, active bool) {
	t.Helper()
	ctx := context.Background()
	m, err := s.Run(ctx, rid)
	if err != nil || m.LastSeq != uint64(n) || m.Terminal == active {
		t.Fatalf("run %s: last seq %d terminal %v, %v; want %d, active %v", rid, m.LastSeq, m.Terminal, err, n, active)
	}
	got, err := s.Read(ctx, rid, 0, n+10)
	if err != nil || len(got) != n {
		t.Fatalf("run %s: read %d events, %v; want %d", rid, len(got), err, n)
	}
	for i, e := range got {
		want := fmt.Sprintf(`{"message_id":"m","text":"t%d"}`, i+1)
		if e.Seq != uint64(i+1) || string(e.Payload) != want {
			t.Fatalf("run %s event %d: seq %d %s, want %s", rid, i, e.Seq, e.Payload, want)
		}
	}
}

func appendTokens(t testing.TB, s *Store, sid, rid string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		e, err := s.Append(context.Background(), tokenEvent(t, sid, rid, "t"+strconv.Itoa(i)), rid+"/"+strconv.Itoa(i))
		if err != nil || e.Seq != uint64(i) {
			t.Fatalf("append t%d: seq %d, %v", i, e.Seq, err)
		}
	}
}

// A torn tail is cut at the last whole record: the log is truncated at
// every byte offset of its last record (a torn write) and reopened; the
// events before it are all there, the torn one is gone, and the run goes
// on from there. A flipped byte in the last record is cut the same way.
func TestRecover_TornTailAtEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{NoSync: true})
	mustBegin(t, s, "s1", "r1")
	mustBegin(t, s, "s2", "r2")
	appendTokens(t, s, "s1", "r1", 1, 5)
	appendTokens(t, s, "s2", "r2", 1, 3)
	appendTokens(t, s, "s1", "r1", 6, 6) // the last record: r1's t6
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, path)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	starts, size := recordStarts(t, segs[0])
	last := starts[len(starts)-1]

	reopen := func(what string, damage func(file string)) {
		t.Helper()
		cp := copyJournal(t, path, t.TempDir())
		damage(segFiles(t, cp)[0])
		s := mustOpen(t, cp, Options{NoSync: true})
		defer s.Close()
		checkRun(t, s, "r1", 5, true)
		checkRun(t, s, "r2", 3, true)
		if st, err := os.Stat(segFiles(t, cp)[0]); err != nil || st.Size() != int64(last) {
			t.Fatalf("%s: segment is %d bytes after open, want %d (cut at the last whole record)", what, st.Size(), last)
		}
		// The torn event was never acknowledged: its key is free again, and
		// the run continues at seq 6.
		appendTokens(t, s, "s1", "r1", 6, 7)
		checkRun(t, s, "r1", 7, true)
	}
	for cut := last; cut < size; cut++ {
		reopen(fmt.Sprintf("cut at %d", cut), func(file string) {
			if err := os.Truncate(file, int64(cut)); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, at := range []int{last, last + 4, last + recHeader, size - 1} {
		reopen(fmt.Sprintf("byte %d flipped", at), func(file string) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			b[at] ^= 0x5a
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Untouched, the log reopens whole.
	s = mustOpen(t, path, Options{NoSync: true})
	defer s.Close()
	checkRun(t, s, "r1", 6, true)
}

// A crash between a marked batch's log write and its bbolt commit (here: a
// run's terminal event, its outbox entry and the session's active run) is
// recovered by cutting the batch: bbolt as it was before the batch and the
// log that holds it reopen as if the batch never happened, and the plain
// batches written before it are kept.
func TestRecover_UncommittedMarkedBatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{Outbox: true})
	mustBegin(t, s, "s1", "r1")
	appendTokens(t, s, "s1", "r1", 1, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := filepath.Join(t.TempDir(), "journal.db")
	copyFile(t, path, before) // bbolt without the terminal batch

	s = mustOpen(t, path, Options{Outbox: true})
	appendTokens(t, s, "s1", "r1", 3, 3) // plain: kept
	done, _ := protocol.NewEvent("r1", "s1", protocol.EventDone, protocol.DonePayload{Status: "completed"})
	if _, err := s.Append(ctx, done, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, before, path) // the crash: the log has the batch, bbolt does not
	starts, _ := recordStarts(t, segFiles(t, path)[0])

	s = mustOpen(t, path, Options{Outbox: true})
	defer s.Close()
	checkRun(t, s, "r1", 3, true)
	if m, err := s.Session(ctx, "s1"); err != nil || m.ActiveRun != "r1" {
		t.Fatalf("session after recovery: active run %q, %v; want r1", m.ActiveRun, err)
	}
	if en, err := s.OutboxList(ctx, 10); err != nil || len(en) != 0 {
		t.Fatalf("outbox after recovery: %+v, %v; want none", en, err)
	}
	after, size := recordStarts(t, segFiles(t, path)[0])
	if len(after) != len(starts)-2 || size != starts[len(starts)-2] {
		t.Fatalf("log after recovery: records at %v (%d bytes), want the marker and the terminal event cut from %v", after, size, starts)
	}
	// The run ends again, this time for good.
	got, err := s.Append(ctx, done, "")
	if err != nil || got.Seq != 4 {
		t.Fatalf("terminal append after recovery: seq %d, %v", got.Seq, err)
	}
	if en, err := s.OutboxList(ctx, 10); err != nil || len(en) != 1 || en[0].Seq != 4 {
		t.Fatalf("outbox: %+v, %v; want the terminal event", en, err)
	}
}
