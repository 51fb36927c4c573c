package hub

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runhub/runhub/hub/tabsock"
)

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

// A sender that writes for a stalled socket (its tab reads nothing) and a
// live one never waits on the stalled one: not when the stalled socket's
// buffers fill (the rest of its frame is left pending), nor when its wire
// is held by a write that waits (as the WebSocket library's pong to a
// stalled tab would). The live socket gets everything it is sent.
func TestSenderPassesAStalledSocketBy(t *testing.T) {
	h := &Hub{}
	h.cfg.defaults()
	env := &socketEnv{cfg: &h.cfg}
	s := newSender()
	s.start()
	defer s.stop()
	socket := func(server net.Conn) *conn {
		c := writerless(env) // its writer never starts: only the sender writes
		c.sock, c.snd, c.cancel = tabsock.NewConn(server, tabsock.Options{}), s, func() {}
		return c
	}
	stalledServer, _ := tcpPair(t, true)
	liveServer, liveClient := tcpPair(t, true)
	stalled, live := socket(stalledServer), socket(liveServer)
	msg := func(i int) []byte {
		return []byte(`{"type":"pong","id":"` + strconv.Itoa(i) + `","pad":"` + string(bytes.Repeat([]byte("p"), 900)) + `"}`)
	}
	read := func(want []byte) {
		t.Helper()
		liveClient.SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang, not a timing
		head := make([]byte, 4)
		if _, err := io.ReadFull(liveClient, head); err != nil {
			t.Fatalf("the live socket got nothing: %v", err)
		}
		got := make([]byte, binary.BigEndian.Uint16(head[2:]))
		if _, err := io.ReadFull(liveClient, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("the live socket got %.40s…, want %.40s…", got, want)
		}
	}
	// Fill the stalled socket: each frame is ~100 messages (~90 KiB), more
	// than its buffers hold.
	for round := range 3 {
		for i := range 100 {
			stalled.out.push(msg(round*100+i), 1<<20)
		}
		stalled.signal()
		live.out.push(msg(round), 1<<20)
		live.signal()
		read(msg(round))
	}
	lockSock(stalled.sock)
	pending := stalled.sock.Pending()
	stalled.sock.Unlock()
	if !pending {
		t.Fatal("the stalled socket's buffers never filled: the test did not stall it")
	}
	// Its wire held by a write that waits.
	lockSock(stalled.sock)
	defer stalled.sock.Unlock()
	stalled.out.push(msg(1000), 1<<20)
	stalled.signal()
	live.out.push(msg(1001), 1<<20)
	live.signal()
	read(msg(1001))
}

// A sender's write allocates nothing: the frame buffer is pooled and the
// header goes in its headroom. (Delivering an event to N sockets is one
// allocation, its frame: TestDeliverEncodesOnce.)
func TestSendNowAllocatesNothing(t *testing.T) {
	h := &Hub{}
	h.cfg.defaults()
	server, client := tcpPair(t, false)
	go io.Copy(io.Discard, client)
	c := writerless(&socketEnv{cfg: &h.cfg})
	c.sock, c.cancel = tabsock.NewConn(server, tabsock.Options{}), func() {}
	frame := []byte(`{"type":"event","event":{"seq":1}}`)
	allocs := testing.AllocsPerRun(500, func() {
		c.out.events = append(c.out.events, frame)
		c.sendNow()
	})
	if allocs > 0.1 { // AllocsPerRun counts the process: a little room
		t.Fatalf("%v allocations per frame sent", allocs)
	}
	lockSock(c.sock)
	defer c.sock.Unlock()
	if c.sock.Pending() {
		t.Fatal("a frame left pending to a tab that reads")
	}
}

// lockSock takes a socket's sending side, waiting for a sender that holds
// it for a moment.
func lockSock(s *tabsock.Conn) {
	for !s.TryLock() {
		runtime.Gosched()
	}
}
