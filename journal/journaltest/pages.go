package journaltest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/runhub/runhub/journal"
)

// SessionsPage walks an owner's sessions in Sessions' order a page at a
// time: the pages are the whole list, more is false only on the last, a
// page after the last session is empty, and an after that is not one of
// the owner's sessions (unknown, or another owner's) is ErrNotFound.
func testSessionsPage(t *testing.T, b Backend) {
	f := newFixture(t, b)
	const t0 = 1764460800.0
	for i := range 11 {
		owner := "alice"
		if i%4 == 1 {
			owner = "bob"
		}
		if err := f.s.CreateSession(f.ctx, journal.SessionMeta{ID: fmt.Sprintf("sess-%02d", i), Owner: owner, CreatedAt: t0 + float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := f.s.Sessions(f.ctx, "alice")
	if err != nil || len(all) != 8 {
		t.Fatalf("Sessions(alice): %d, %v", len(all), err)
	}
	var want []string
	for _, m := range all {
		want = append(want, m.ID)
	}
	var got []string
	after := ""
	for pages := 1; ; pages++ {
		page, more, err := f.s.SessionsPage(f.ctx, "alice", after, 3)
		if err != nil {
			t.Fatalf("SessionsPage(alice, %q, 3): %v", after, err)
		}
		if len(page) != min(3, len(want)-len(got)) || more != (len(got)+len(page) < len(want)) {
			t.Fatalf("page %d after %q: %d sessions, more %v (have %d of %d)", pages, after, len(page), more, len(got), len(want))
		}
		for _, m := range page {
			if m.Owner != "alice" {
				t.Fatalf("SessionsPage(alice) lists %s of %s", m.ID, m.Owner)
			}
			got = append(got, m.ID)
		}
		if !more {
			break
		}
		after = got[len(got)-1]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the pages list %v, want %v", got, want)
	}
	if page, more, err := f.s.SessionsPage(f.ctx, "alice", want[len(want)-1], 3); err != nil || len(page) != 0 || more {
		t.Fatalf("after the last: %d sessions, more %v, %v", len(page), more, err)
	}
	if page, _, err := f.s.SessionsPage(f.ctx, "alice", "", 100); err != nil || len(page) != len(want) {
		t.Fatalf("one page of 100: %d sessions, %v", len(page), err)
	}
	for _, after := range []string{"no-such-session", "sess-01"} {
		_, _, err := f.s.SessionsPage(f.ctx, "alice", after, 3)
		wantErr(t, "SessionsPage(alice) after "+after, err, journal.ErrNotFound)
	}
	if page, more, err := f.s.SessionsPage(f.ctx, "carol", "", 3); err != nil || len(page) != 0 || more {
		t.Fatalf("an owner without sessions: %d, %v, %v", len(page), more, err)
	}
}
