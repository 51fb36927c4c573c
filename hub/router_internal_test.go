package hub

import (
	"slices"
	"testing"
)

// The router's list of a session's sockets follows focus and unfocus: each
// socket once, in no particular order, the last one out removes the feed.
func TestRouterFeedList(t *testing.T) {
	h := &Hub{}
	h.cfg.defaults()
	r := newRouter(h)
	env := &socketEnv{cfg: &h.cfg}
	a, b, c := writerless(env), writerless(env), writerless(env)
	for _, x := range []*conn{a, b, c, b} { // b twice: listed once
		r.focus(x, "s_1")
	}
	list := func() []*conn {
		f := r.feeds["s_1"]
		if f == nil {
			return nil
		}
		if len(f.list) != len(f.conns) {
			t.Fatalf("list %d sockets, map %d", len(f.list), len(f.conns))
		}
		return f.list
	}
	if l := list(); len(l) != 3 || !slices.Contains(l, a) || !slices.Contains(l, b) || !slices.Contains(l, c) {
		t.Fatalf("list %v after focusing a, b, c", l)
	}
	r.unfocus(b)
	r.unfocus(b) // not focused any more: nothing happens
	if l := list(); len(l) != 2 || slices.Contains(l, b) {
		t.Fatalf("list %v after unfocusing b", l)
	}
	r.unfocus(a)
	r.unfocus(c)
	if l := list(); l != nil {
		t.Fatalf("feed left with %v after the last socket left", l)
	}
}
