//go:build !linux

package tabsock

// Poller is the shared wait for idle sockets (poller_linux.go); without
// epoll there is none, and each socket reads on a goroutine of its own.
type Poller struct{}

func NewPoller() *Poller           { return nil }
func (p *Poller) Stop()            {}
func (p *Poller) arm(c *Conn) bool { return false }
func (p *Poller) closing(c *Conn)  {}
