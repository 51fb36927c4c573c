package tabsock_test

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/runhub/runhub/hub/tabsock"
)

// discard reads a socket's messages and drops them (tabsock.Reader).
type discard struct {
	c    *tabsock.Conn
	done chan struct{}
}

func (d *discard) Next() bool {
	_, _, err := d.c.ReadMessage()
	return err == nil
}

func (d *discard) End() {
	d.c.Close()
	close(d.done)
}

// BenchmarkPartialFrameCost reports what a socket that sent part of a
// frame, then nothing, holds until its FrameTimeout runs out (heap and
// goroutine stacks, per socket, over that of an idle socket), for a
// header cut short and for a data frame claiming 1 MiB of which nothing
// came (docs/protocol.md, "The tab socket's transport").
func BenchmarkPartialFrameCost(b *testing.B) {
	const sockets = 500
	for _, tc := range []struct {
		name string
		sent []byte
	}{
		{"idle", nil},
		{"half-header", []byte{0x82}},
		{"data-1MiB-claimed", []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0x10, 0, 0, 1, 2, 3, 4}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				p := tabsock.NewPoller()
				var ends []chan struct{}
				var clients []net.Conn
				before := memUse()
				for range sockets {
					cl, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					sv, err := ln.Accept()
					if err != nil {
						b.Fatal(err)
					}
					c := tabsock.NewConn(sv, tabsock.Options{ReadLimit: 2 << 20, FrameTimeout: time.Minute})
					d := &discard{c: c, done: make(chan struct{})}
					c.Serve(p, d)
					if tc.sent != nil {
						cl.Write(tc.sent)
					}
					clients = append(clients, cl)
					ends = append(ends, d.done)
				}
				time.Sleep(200 * time.Millisecond) // every partial frame has been read as far as it goes
				b.ReportMetric(float64(memUse()-before)/sockets, "B/socket")
				for _, cl := range clients {
					cl.Close()
				}
				for _, e := range ends {
					<-e
				}
				if p != nil {
					p.Stop()
				}
				ln.Close()
			}
		})
	}
}

// memUse is the live heap and the goroutine stacks in use, after a
// collection.
func memUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}
