package bolt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recordsEnd returns the file's bytes, where its whole records end and
// where the last one starts (a tail that is no record, zeros included,
// is past the end).
func recordsEnd(t testing.TB, file string) (b []byte, end, last int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for end < len(b) {
		_, n, ok := frame(b[end:])
		if !ok {
			break
		}
		last, end = end, end+n
	}
	return b, end, last
}

// With fsync on, the active segment runs ahead of its records with zeros;
// a crash leaves them, and recovery cuts them off, whether the last
// record is whole or was torn over the zeros at any byte.
func TestZeroAhead_CrashTailIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{})
	mustBegin(t, s, "s1", "r1")
	appendTokens(t, s, "s1", "r1", 1, 5)
	file := segFiles(t, path)[0]
	b, end, last := recordsEnd(t, file)
	if len(b) < end+zeroChunk/2 || !bytes.Equal(b[end:], make([]byte, len(b)-end)) {
		t.Fatalf("segment is %d bytes with records to %d: want zeros ahead of them", len(b), end)
	}

	// The process dies here: the files are as the crash leaves them.
	crash := func(what string, damage func(file string)) {
		t.Helper()
		cp := copyJournal(t, path, t.TempDir())
		damage(segFiles(t, cp)[0])
		s := mustOpen(t, cp, Options{})
		defer s.Close()
		n := 5
		if damage != nil && what != "whole" {
			n = 4
		}
		checkRun(t, s, "r1", n, true)
		want := end
		if n == 4 {
			want = last
		}
		if _, got, _ := recordsEnd(t, segFiles(t, cp)[0]); got != want {
			t.Fatalf("%s: records end at %d after open, want %d", what, got, want)
		}
		appendTokens(t, s, "s1", "r1", n+1, n+2) // the run goes on
		checkRun(t, s, "r1", n+2, true)
	}
	crash("whole", func(string) {})
	for cut := last; cut < end; cut++ {
		crash(fmt.Sprintf("torn at %d", cut), func(file string) {
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, end-cut), int64(cut)); err != nil { // the write never reached the zeros
				t.Fatal(err)
			}
		})
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if b, end, _ := recordsEnd(t, file); len(b) != end {
		t.Fatalf("after Close the segment is %d bytes, its records %d: zeros left", len(b), end)
	}
}

// Only the active segment holds zeros: a roll cuts the old one back to its
// records, so recovery, which takes a bad record in an older segment for
// corruption, finds none.
func TestZeroAhead_RollTrimsTheOldSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{segmentBytes: 4 << 10})
	mustBegin(t, s, "s1", "r1")
	appendTokens(t, s, "s1", "r1", 1, 150)
	segs := segFiles(t, path)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want 3 or more", len(segs))
	}
	for _, f := range segs[:len(segs)-1] {
		if b, end, _ := recordsEnd(t, f); len(b) != end || end == 0 {
			t.Fatalf("%s: %d bytes, records to %d: an older segment must end at its records", f, len(b), end)
		}
	}
	if b, end, _ := recordsEnd(t, segs[len(segs)-1]); len(b) <= end {
		t.Fatalf("active segment: %d bytes, records to %d: want zeros ahead", len(b), end)
	}
	cp := copyJournal(t, path, t.TempDir()) // a crash
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, cp, Options{segmentBytes: 4 << 10})
	defer s.Close()
	checkRun(t, s, "r1", 150, true)
}
