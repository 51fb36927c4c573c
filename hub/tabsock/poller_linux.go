//go:build linux

package tabsock

import (
	"os"
	"sync"
	"syscall"
)

// Poller waits for idle sockets to become readable, all of them in one
// epoll set on one goroutine, so that an idle socket has no goroutine
// (and no stack) of its own: a socket with nothing to read is armed here
// (one-shot), and the first bytes that reach it start a goroutine that
// reads what came, then arms it again (Serve).
// A socket that is closed while armed is disarmed and given a last turn,
// whose read fails.
//
// Locking: mu guards armed and the sockets' poller fields; it is held
// around every epoll_ctl so that an fd closed and reused by another
// socket is never confused with it.
type Poller struct {
	epfd  int
	file  *os.File        // epfd, waited on through the runtime's network poller (run)
	raw   syscall.RawConn // file's
	mu    sync.Mutex
	armed map[int32]*Conn // by fd
	done  chan struct{}
}

// NewPoller makes a poller and starts its goroutine (Stop ends it); nil
// when epoll is not available (each socket then reads on a goroutine of
// its own).
func NewPoller() *Poller {
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
	p := &Poller{epfd: epfd, file: os.NewFile(uintptr(epfd), "tabsock-epoll"), armed: map[int32]*Conn{}, done: make(chan struct{})}
	if p.raw, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		return nil
	}
	go p.run()
	return p
}

// Stop ends the poller's goroutine and waits for it; sockets still armed
// are their owners' to end.
func (p *Poller) Stop() {
	p.file.Close() // run's wait fails
	<-p.done
}

func (p *Poller) run() {
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
				go c.turn()
			}
		}
	}
}

// arm waits for c's connection to have something to read, then gives c a
// turn; false: it could not be armed.
func (p *Poller) arm(c *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.gone {
		return false // closed meanwhile: the caller's read fails and ends it
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(c.fd)}
	op := syscall.EPOLL_CTL_MOD
	if !c.added {
		op = syscall.EPOLL_CTL_ADD
	}
	if err := syscall.EpollCtl(p.epfd, op, c.fd, &ev); err != nil {
		return false
	}
	c.added = true
	p.armed[int32(c.fd)] = c
	return true
}

// closing is called by c's Close before it closes the descriptor: it
// leaves the set, and a socket that was armed gets a last turn (its read
// fails).
func (p *Poller) closing(c *Conn) {
	p.mu.Lock()
	c.gone = true
	wasArmed := p.armed[int32(c.fd)] == c
	if wasArmed {
		delete(p.armed, int32(c.fd))
	}
	if c.added {
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, c.fd, &syscall.EpollEvent{})
		c.added = false
	}
	p.mu.Unlock()
	if wasArmed {
		go c.turn()
	}
}
