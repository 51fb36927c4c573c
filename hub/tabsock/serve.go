package tabsock

// Reader is the owner of a served socket (Serve): Next reads one message
// (ReadMessage) and handles it, false ends the socket; End is told once,
// after the last Next, and closes the socket.
type Reader interface {
	Next() bool
	End()
}

// Serve reads the socket with r, and returns at once. With a poller (a
// plain socket on Linux) the socket has no goroutine while idle: the
// poller waits for its bytes, and each time they come a goroutine is
// started (turn) that calls Next until nothing is left to read, then arms
// the socket again and ends. Without one, the socket has a reader
// goroutine of its own, parked in WaitReadable while idle.
func (c *Conn) Serve(p *Poller, r Reader) {
	c.reader = r
	if p == nil || c.fd < 0 {
		go c.readLoop()
		return
	}
	c.poller = p
	if !c.Buffered() && p.arm(c) {
		return
	}
	go c.turn()
}

// turn reads and handles the messages that have come, then arms the
// socket again; a read that fails (the socket closed) or a message that
// ends the socket ends it here. Turns of a socket run one at a time: the
// next starts once this one has armed it.
func (c *Conn) turn() {
	for {
		if !c.reader.Next() {
			c.reader.End()
			return
		}
		if !c.Buffered() && c.poller.arm(c) {
			return
		}
	}
}

// readLoop is the reader goroutine of a socket no poller waits for. It
// waits here, a few frames deep, while idle: its stack stays at the 2 KiB
// it started with. Reading a message and handling it go deeper, so both
// run on a goroutine of their own, waited for, so messages stay in order;
// that goroutine's stack goes back to the runtime's cache when it ends,
// where a reader parked in a read would keep it for the socket's life.
func (c *Conn) readLoop() {
	for {
		c.WaitReadable()
		done := make(chan bool, 1)
		go func() { done <- c.reader.Next() }()
		if !<-done {
			c.reader.End()
			return
		}
	}
}
