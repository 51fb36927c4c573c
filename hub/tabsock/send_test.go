package tabsock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// countConn counts the writes that reach the connection.
type countConn struct {
	net.Conn
	writes [][]byte
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// payloadFrame is a frame buffer (headroom, then payload) holding n bytes
// of b.
func payloadFrame(n int, b byte) []byte {
	return append(make([]byte, FrameHeadroom), bytes.Repeat([]byte{b}, n)...)
}

// A frame the hub sends is one write: its header (of each length's form)
// and its payload together; a control frame the WebSocket library writes
// through its buffer reaches the connection whole, in one write too.
func TestWireOneWritePerFrame(t *testing.T) {
	cc := &countConn{}
	w := NewConn(cc, Options{ReadLimit: -1})
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	heads := map[int][]byte{
		0:       {0x81, 0},
		125:     {0x81, 125},
		126:     {0x81, 126, 0, 126},
		0xffff:  {0x81, 126, 0xff, 0xff},
		0x10000: {0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0},
	}
	for n, head := range heads {
		cc.writes = nil
		if err := w.Send(TextFrame(payloadFrame(n, 'x')), timer, time.Second); err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, b := range cc.writes {
			got = append(got, b...)
		}
		if n <= writeChunk && len(cc.writes) != 1 {
			t.Fatalf("%d-byte payload: %d writes", n, len(cc.writes))
		}
		if !bytes.Equal(got[:len(head)], head) || len(got) != len(head)+n {
			t.Fatalf("%d-byte payload: header % x, %d bytes; want header % x", n, got[:min(len(got), 10)], len(got), head)
		}
	}

	// The largest control frame: a close with 125 bytes of payload, in
	// one write; a second close frame is not sent.
	cc.writes = nil
	if err := w.control(opClose, bytes.Repeat([]byte("c"), 125)); err != nil {
		t.Fatal(err)
	}
	if len(cc.writes) != 1 || len(cc.writes[0]) != 127 || cc.writes[0][0] != 0x88 {
		t.Fatalf("a control frame in %d writes", len(cc.writes))
	}
	if err := w.close(1000, "again"); err != nil || len(cc.writes) != 1 {
		t.Fatalf("a second close frame: %v, %d writes", err, len(cc.writes))
	}
	if err := w.Send(TextFrame(payloadFrame(3, 'x')), timer, time.Second); err != ErrCloseSent {
		t.Fatalf("a frame after the close frame: %v", err)
	}
}

// tcpPair is a loopback TCP connection, with 4 KiB buffers if small: the
// server side (sent from) and the client side (read, or not).
func tcpPair(t *testing.T, small bool) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	for _, c := range []net.Conn{server, client} {
		if !small {
			break
		}
		raw, _ := c.(*net.TCPConn).SyscallConn()
		raw.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return server, client
}

// A sender's write to a tab that reads nothing never waits: once the
// socket's buffers are full it leaves the rest of its frame pending and
// returns. What is pending goes out first, before the writer's next frame
// and before a control frame of the library, and the tab gets every byte
// in order.
func TestWireTrySendNeverWaits(t *testing.T) {
	server, client := tcpPair(t, true)
	w := NewConn(server, Options{ReadLimit: -1})
	if !w.Direct() {
		t.Fatal("no file descriptor: trySend cannot write")
	}
	var sent []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			bp := GetFrame()
			*bp = append((*bp)[:0], payloadFrame(1000, byte('a'+i%26))...)
			frame := TextFrame(*bp)
			if !w.TryLock() {
				t.Error("the wire is locked with nobody writing")
				return
			}
			left, err := w.TrySend(bp, len(*bp)-len(frame))
			w.mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			sent = append(sent, frame...)
			if left {
				return // the buffers are full: the rest is pending
			}
			if i > 10000 {
				t.Error("10 MB written to a tab that reads nothing")
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("trySend waited on a tab that reads nothing")
	}
	if t.Failed() {
		return
	}
	w.mu.Lock()
	pending := w.Pending()
	w.mu.Unlock()
	if !pending {
		t.Fatal("nothing pending after a partial write")
	}

	// The writer's next frame and a pong of the library, both waiting, go
	// out after what is pending.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	next := TextFrame(payloadFrame(2000, 'z'))
	errs := make(chan error, 1)
	go func() {
		err := w.Send(next, timer, time.Minute)
		if err == nil {
			err = w.control(opPong, nil)
		}
		errs <- err
	}()
	sent = append(sent, next...)
	sent = append(sent, 0x8a, 0)
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("the tab read %d bytes that differ from the %d sent", len(got), len(sent))
	}
	if n := binary.BigEndian.Uint16(got[2:]); got[0] != 0x81 || got[1] != 126 || n != 1000 {
		t.Fatalf("first frame header % x", got[:4])
	}
}

// trySend writes to the socket's descriptor directly; once the
// connection the library holds is closed it writes nothing more (a
// closed descriptor may be another connection's by then), and a Close
// racing with senders' writes waits for the one in progress.
func TestWireDirectWriteStopsAtClose(t *testing.T) {
	server, client := tcpPair(t, false)
	go io.Copy(io.Discard, client)
	w := NewConn(server, Options{ReadLimit: -1})
	send := func() error {
		bp := GetFrame()
		*bp = append((*bp)[:0], payloadFrame(100, 'x')...)
		frame := TextFrame(*bp)
		w.mu.Lock()
		left, err := w.TrySend(bp, len(*bp)-len(frame))
		w.mu.Unlock()
		if !left {
			PutFrame(bp)
		}
		return err
	}
	if err := send(); err != nil {
		t.Fatalf("before Close: %v", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for send() == nil {
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := send(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}
