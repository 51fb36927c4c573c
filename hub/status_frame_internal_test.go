package hub

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/runhub/runhub/protocol"
)

// A tracked session's status frame is encodeStatus's bytes, whatever its
// presence: the status without presence is encoded once per change of
// the session and reused while only the presence changes (every tab that
// watches or focuses the session changes it), and encoded again once the
// session changes.
func TestTrackedFrame_ReusedUntilTheSessionChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCadenceRig(t, 0)
		r.tab()
		synctest.Wait()
		tr := r.h.tracker
		frame := func(what string) []byte {
			t.Helper()
			tr.mu.Lock()
			defer tr.mu.Unlock()
			s := tr.sessions["s_1"]
			if s == nil || !s.loaded {
				t.Fatalf("%s: s_1 not loaded", what)
			}
			f, err := s.frame(r.h)
			got := f.appendTo(nil)
			want, werr := r.h.encodeStatus(&s.state)
			if err != nil || werr != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: frame\n%s (%v)\nwant encodeStatus's\n%s (%v)", what, got, err, want, werr)
			}
			return s.enc
		}
		setPresence := func(p *protocol.Presence) {
			tr.mu.Lock()
			tr.sessions["s_1"].state.Presence = p
			tr.mu.Unlock()
		}
		enc := frame("with this tab's presence")
		for _, p := range []*protocol.Presence{
			nil,
			{Watching: 2, Focused: 1, Subjects: []protocol.PresenceSubject{{Subject: "ana", Watching: 1, Focused: 1}, {Subject: "<b&o>\u2028é\"", Watching: 1}}},
			{Watching: 1, Subjects: []protocol.PresenceSubject{}},
		} {
			setPresence(p)
			if got := frame("another presence"); unsafe.SliceData(got) != unsafe.SliceData(enc) {
				t.Fatal("a change of presence only encoded the status again")
			}
			// The presence is encoded once per change too: the frames of
			// the tabs that start watching meanwhile share its bytes.
			tr.mu.Lock()
			s := tr.sessions["s_1"]
			f1, _ := s.frame(r.h)
			f2, _ := s.frame(r.h)
			tr.mu.Unlock()
			if (p == nil) != (f1.pres == nil) || (p != nil && unsafe.SliceData(f1.pres) != unsafe.SliceData(f2.pres)) {
				t.Fatalf("presence %v: encoded again for an unchanged presence (or dropped): %q, %q", p, f1.pres, f2.pres)
			}
		}
		r.emit(protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hi"})
		time.Sleep(time.Millisecond)
		synctest.Wait()
		tr.mu.Lock()
		stale := tr.sessions["s_1"].enc
		tr.mu.Unlock()
		if stale != nil && unsafe.SliceData(stale) == unsafe.SliceData(enc) {
			t.Fatal("the session changed and its encoded status was kept")
		}
		if got := frame("after run.started"); !bytes.Contains(got, []byte(`"status":"running"`)) {
			t.Fatalf("encoded status after run.started: %s", got)
		}
	})
}

// A runtime's capabilities can change while its session does not (a
// Hermes server's report): the frame narrows active_controls by what they
// are now, not by what they were when the status was encoded.
func TestTrackedFrame_FollowsCapabilities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		caps := []string{"cancel", "queue"}
		r := newCadenceRigWith(t, Config{Capabilities: func(string, string) ([]string, bool) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(caps), true
		}})
		h := r.h
		r.tab()
		r.emit(protocol.EventRunStarted, protocol.RunStartedPayload{Message: "hi"})
		time.Sleep(time.Millisecond)
		synctest.Wait()
		frame := func(what string) []byte {
			t.Helper()
			h.tracker.mu.Lock()
			defer h.tracker.mu.Unlock()
			s := h.tracker.sessions["s_1"]
			if s == nil || !s.loaded {
				t.Fatalf("%s: s_1 not loaded", what)
			}
			f, err := s.frame(h)
			got := f.appendTo(nil)
			want, werr := h.encodeStatus(&s.state)
			if err != nil || werr != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: frame\n%s (%v)\nwant encodeStatus's\n%s (%v)", what, got, err, want, werr)
			}
			return got
		}
		if got := frame("cancel offered"); !bytes.Contains(got, []byte(`"cancel"`)) {
			t.Fatalf("a running session's controls without cancel, which its runtime can do: %s", got)
		}
		mu.Lock()
		caps = []string{"queue"}
		mu.Unlock()
		if got := frame("cancel withdrawn"); bytes.Contains(got, []byte(`"cancel"`)) {
			t.Fatalf("cancel still offered after the runtime stopped reporting it: %s", got)
		}
	})
}
