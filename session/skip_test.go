package session_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/runhub/runhub/protocol"
	"github.com/runhub/runhub/session"
)

// Folding deltas a status feed left out with Skip gives the state that
// folding each of them with Apply gives, whatever their mix, and the run
// folds on from there.
func TestRun_SkipEqualsApply(t *testing.T) {
	for name, deltas := range map[string][]step{
		"tokens":              {token, token, token},
		"reasoning":           {reasoning, reasoning},
		"tokens then tool":    {token, token, toolOut},
		"reasoning then text": {reasoning, token},
		"tool output only":    {toolOut, toolOut},
	} {
		t.Run(name, func(t *testing.T) {
			for _, before := range [][]step{{started}, {started, toolStart}} {
				want := play(t, append(append([]step{}, before...), deltas...)...)
				got := play(t, before...)
				var tokens int64
				var last protocol.EventType
				for _, d := range deltas {
					if d.typ == protocol.EventTokenDelta {
						tokens++
					}
					if d.typ != protocol.EventToolUpdated {
						last = d.typ
					}
				}
				if err := got.Skip(int64(len(deltas)), tokens, last, want.LastSeq, want.UpdatedAt); err != nil {
					t.Fatalf("Skip: %v", err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Skip gave\n%+v\nApply gave\n%+v", got, want)
				}
				apply(t, &got, done)
				apply(t, &want, done)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("after done: %+v, want %+v", got, want)
				}
			}
		})
	}
}

// Skip refuses what would not be the next events: a gap, an overlap, a
// count of tokens beyond the count, deltas after the terminal event.
func TestRun_SkipRefuses(t *testing.T) {
	r := play(t, started, token) // LastSeq 2
	for _, c := range []struct {
		count, tokens int64
		seq           uint64
	}{{2, 2, 5}, {2, 2, 3}, {0, 0, 2}, {1, 2, 3}} {
		before := r
		if err := r.Skip(c.count, c.tokens, protocol.EventTokenDelta, c.seq, 1); !errors.Is(err, session.ErrSeq) {
			t.Errorf("Skip(%d, %d, seq %d) = %v, want ErrSeq", c.count, c.tokens, c.seq, err)
		}
		if !reflect.DeepEqual(r, before) {
			t.Errorf("a refused Skip changed the run")
		}
	}
	ended := play(t, started, done)
	if err := ended.Skip(1, 1, protocol.EventTokenDelta, 3, 1); !errors.Is(err, session.ErrAfterTerminal) {
		t.Errorf("Skip after the terminal event = %v, want ErrAfterTerminal", err)
	}
}
