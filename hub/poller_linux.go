//go:build linux

package hub

import (
	"os"
	"sync"
	"syscall"
)

// poller waits for the hub's idle sockets to become readable, all of them
// in one epoll set on one goroutine, so that an idle socket has no
// goroutine (and no stack) of its own: a socket with nothing to read is
// armed here (one-shot), and the first bytes that reach it start a
// goroutine that reads and handles what came (conn.turn, serve.go),
// then arms it again. A socket that is closed while armed is disarmed
// and given a last turn, whose read fails and ends the socket.
//
// Locking: mu guards armed; it is held around every epoll_ctl so that an
// fd closed and reused by another socket is never confused with it.
type poller struct {
	epfd  int
	file  *os.File        // epfd, waited on through the runtime's network poller (run)
	raw   syscall.RawConn // file's
	mu    sync.Mutex
	armed map[int32]*conn // by fd
	done  chan struct{}
	turn  func(*conn) // a socket's turn (conn.turn), set by socketPoller
}

// newPoller makes a hub's poller; nil when epoll is not available (its
// sockets then each read on a goroutine of their own).
func newPoller() *poller {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	// Non-blocking, so that os.NewFile puts it in the runtime's network
	// poller: run parks like any goroutine waiting for a socket (an epoll
	// set is readable while it has events), not in a blocking system call
	// whose thread must win a P back before it can start a turn.
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil
	}
	p := &poller{epfd: epfd, file: os.NewFile(uintptr(epfd), "runhub-epoll"), armed: map[int32]*conn{}, done: make(chan struct{})}
	if p.raw, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		return nil
	}
	return p
}

func (p *poller) start() { go p.run() }

// stop ends run and waits for it; sockets still armed are the hub's to
// end (Shutdown ends every socket before).
func (p *poller) stop() {
	p.file.Close() // run's wait fails
	<-p.done
}

func (p *poller) run() {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n := 0
		err := p.raw.Read(func(fd uintptr) bool {
			got, err := syscall.EpollWait(int(fd), events, 0)
			if err != nil || got <= 0 {
				return false // nothing yet: wait until the set is readable
			}
			n = got
			return true
		})
		if err != nil {
			return // stopped
		}
		for _, ev := range events[:n] {
			p.mu.Lock()
			c := p.armed[ev.Fd]
			delete(p.armed, ev.Fd)
			p.mu.Unlock()
			if c != nil {
				go p.turn(c)
			}
		}
	}
}

// arm waits for c's connection (fd) to have something to read, then gives
// c a turn; false: it could not be armed (the caller reads at once).
func (p *poller) arm(c *conn, fd int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.poll.closed {
		return false // closed meanwhile: the caller's read fails and ends it
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(fd)}
	op := syscall.EPOLL_CTL_MOD
	if !c.poll.added {
		op = syscall.EPOLL_CTL_ADD
	}
	if err := syscall.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return false
	}
	c.poll.added = true
	p.armed[int32(fd)] = c
	return true
}

// closing is called by c's connection before it closes fd: fd leaves the
// set, and a socket that was armed gets a last turn (its read fails).
func (p *poller) closing(c *conn, fd int) {
	p.mu.Lock()
	c.poll.closed = true
	wasArmed := p.armed[int32(fd)] == c
	if wasArmed {
		delete(p.armed, int32(fd))
	}
	if c.poll.added {
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, fd, &syscall.EpollEvent{})
		c.poll.added = false
	}
	p.mu.Unlock()
	if wasArmed {
		go p.turn(c)
	}
}
