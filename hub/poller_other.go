//go:build !linux

package hub

// poller is the shared wait for idle sockets (poller_linux.go); without
// epoll there is none, and each socket reads on a goroutine of its own.
type poller struct {
	turn func(*conn)
}

func newPoller() *poller                   { return nil }
func (p *poller) start()                   {}
func (p *poller) stop()                    {}
func (p *poller) arm(c *conn, fd int) bool { return false }
func (p *poller) closing(c *conn, fd int)  {}
