package hub

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// computeFrom sums a few subjects without a map and many with one; both
// give what summing every subject in a map and sorting gives.
func TestComputeFrom_AsAMapSumsIt(t *testing.T) {
	want := func(src map[string]pentry, sid, owner string) *protocol.Presence {
		sum := map[string]pcount{}
		for _, tg := range []string{"s:" + sid, "o:" + owner} {
			for subject, n := range src[tg] {
				cur := sum[subject]
				cur.W += n.W
				cur.F += n.F
				sum[subject] = cur
			}
		}
		if len(sum) == 0 {
			return nil
		}
		out := &protocol.Presence{Subjects: []protocol.PresenceSubject{}}
		for _, subject := range slices.Sorted(maps.Keys(sum)) {
			n := sum[subject]
			out.Watching += n.W
			out.Focused += n.F
			if len(out.Subjects) < protocol.MaxPresenceSubjects {
				out.Subjects = append(out.Subjects, protocol.PresenceSubject{Subject: subject, Watching: n.W, Focused: n.F})
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		src := map[string]pentry{}
		for _, tg := range []string{"s:s1", "o:ana"} {
			if rng.IntN(4) == 0 {
				continue
			}
			e := pentry{}
			for range rng.IntN(3 * smallPresence) {
				e[fmt.Sprintf("u%d", rng.IntN(2*smallPresence))] = pcount{W: rng.IntN(3), F: rng.IntN(2)}
			}
			src[tg] = e
		}
		got, w := computeFrom(src, "s1", "ana"), want(src, "s1", "ana")
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("case %d: computeFrom %+v, want %+v", i, got, w)
		}
	}
}
