package bolt

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// An offset list gives back every offset from any seq, also after offsets
// were moved out of order (compaction), and costs a few bytes an event.
func TestOffList(t *testing.T) {
	var l offList
	var want []uint64
	off := uint64(0)
	for range 1000 {
		off += uint64(50 + rand.IntN(30000))
		l.add(off)
		want = append(want, off)
	}
	check := func(what string) {
		t.Helper()
		for _, from := range []uint64{0, 1, 2, 31, 32, 33, 64, 65, 999, 1000, 1001} {
			var got []uint64
			l.each(from, func(seq, off uint64) bool {
				if seq != max(from, 1)+uint64(len(got)) {
					t.Fatalf("%s: each(%d) gave seq %d after %d offsets", what, from, seq, len(got))
				}
				got = append(got, off)
				return true
			})
			if w := want[min(max(from, 1)-1, uint64(len(want))):]; !slices.Equal(got, w) {
				t.Fatalf("%s: each(%d) = %d offsets, want %d", what, from, len(got), len(w))
			}
		}
		for seq := uint64(1); seq <= 1000; seq += 37 {
			if got := l.at(seq); got != want[seq-1] {
				t.Fatalf("%s: at(%d) = %d, want %d", what, seq, got, want[seq-1])
			}
		}
	}
	check("appended")
	if per := float64(l.size()) / 1000; per > 6 {
		t.Errorf("%.1f bytes an offset", per)
	}
	to := map[uint64]uint64{1: off + 10, 500: 7, 1000: off + 99}
	l.relocate(to)
	for seq, o := range to {
		want[seq-1] = o
	}
	check("relocated")
}

// A key table finds every key's seq among its candidates, grows, and
// stops (overflow) past seqs it cannot hold.
func TestKeyTable(t *testing.T) {
	seed := maphash.MakeSeed()
	var kt keyTable
	for seq := uint64(1); seq <= 5000; seq++ {
		kt.insert(keyPrint(seed, "run/"+strconv.FormatUint(seq, 10)), seq)
	}
	for seq := uint64(1); seq <= 5000; seq++ {
		found := false
		kt.candidates(keyPrint(seed, "run/"+strconv.FormatUint(seq, 10)), func(s uint64) bool {
			found = s == seq
			return !found
		})
		if !found {
			t.Fatalf("key of seq %d not found", seq)
		}
	}
	if per := float64(8*len(kt.slots)) / 5000; per > 22 {
		t.Errorf("%.1f bytes a key", per)
	}
	n := 0
	kt.candidates(keyPrint(seed, "never stored"), func(uint64) bool { n++; return true })
	if n > 1 {
		t.Errorf("%d candidates for a key never stored", n)
	}
	if kt.overflow {
		t.Fatal("overflow too early")
	}
	kt.insert(1, math.MaxUint32+1)
	if !kt.overflow {
		t.Fatal("a seq past 2^32-1 did not overflow the table")
	}
}
