package durable

import (
	"context"
	"fmt"
	"testing"
)

// A buffer whose write ended with the caller's context (the journal may
// still hold the write, queued) never goes back to the pool; one whose
// write was answered does.
func TestReqBody_ReleaseOnlyWhenAnswered(t *testing.T) {
	var p bodyPool
	for _, err := range []error{context.Canceled, fmt.Errorf("commit: %w", context.DeadlineExceeded)} {
		buf := p.get(1 << 20)
		b := &reqBody{data: (*buf)[:1<<20], buf: buf, pool: &p}
		b.release(err)
		for range 20 {
			if got := p.get(1 << 20); got == buf {
				t.Fatalf("after %v the buffer went back to the pool", err)
			}
		}
	}
	buf := p.get(1 << 20)
	b := &reqBody{data: *buf, buf: buf, pool: &p}
	b.release(nil)
	if b.buf != nil || b.data != nil {
		t.Fatal("an answered write's buffer was not handed back")
	}
	for n, want := range map[int]int{1: 16, 64 << 10: 16, 64<<10 + 1: 17, 1 << 20: 20, 16 << 20: 24} {
		if got := bodyClass(n); got != want {
			t.Errorf("bodyClass(%d) = %d, want %d", n, got, want)
		}
	}
}
