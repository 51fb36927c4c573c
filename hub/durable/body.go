package durable

import (
	"context"
	"errors"
	"io"
	"math/bits"
	"net/http"
	"sync"
)

// bodyPool holds the buffers large request bodies are read into, by
// power-of-two size from 64 KiB to 16 MiB: an append of 1 MiB otherwise
// allocates (and the runtime clears) a megabyte per request, a quarter of
// the edge's CPU under large appends. A buffer goes back only once the
// journal has answered the write it carried (body.release): a write whose
// caller's context ended may still be queued with it.
type bodyPool struct {
	classes [maxBodyClass - minBodyClass + 1]sync.Pool
}

const (
	minBodyClass = 16 // 64 KiB: smaller bodies are allocated as needed
	maxBodyClass = 24 // 16 MiB: larger ones too
)

// reqBody is a request body read by readBody; release hands its buffer back
// once nothing refers to it any more.
type reqBody struct {
	data []byte
	buf  *[]byte // from the pool, or nil
	pool *bodyPool
}

// release returns the buffer to its pool unless err says the write may
// still be under way with it (the caller's context ended first).
func (b *reqBody) release(err error) {
	if b.buf == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	b.pool.put(b.buf)
	b.buf, b.data = nil, nil
}

func bodyClass(n int) int { return max(minBodyClass, bits.Len(uint(n-1))) }

func (p *bodyPool) get(n int) *[]byte {
	c := bodyClass(n)
	if v, ok := p.classes[c-minBodyClass].Get().(*[]byte); ok {
		return v
	}
	b := make([]byte, 1<<c)
	return &b
}

func (p *bodyPool) put(b *[]byte) {
	c := bits.Len(uint(cap(*b))) - 1
	if c >= minBodyClass && c <= maxBodyClass && cap(*b) == 1<<c {
		p.classes[c-minBodyClass].Put(b)
	}
}

// readBody reads at most max bytes of the body (413 past them): one of a
// known length of 64 KiB to 16 MiB into a pooled buffer, any other into a
// new one.
func (d *Edge) readBody(r *http.Request, max int64) (*reqBody, error) {
	n := r.ContentLength
	if r.Body == nil || n < 1<<minBodyClass || n > 1<<maxBodyClass || n > max {
		b, err := readBody(r, max)
		return &reqBody{data: b}, err
	}
	buf := d.bodies.get(int(n))
	if _, err := io.ReadFull(r.Body, (*buf)[:n]); err != nil {
		d.bodies.put(buf)
		return nil, badRequest("reading the body: %v", err)
	}
	return &reqBody{data: (*buf)[:n], buf: buf, pool: &d.bodies}, nil
}
