package main

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// child is a started test process (a hub or a runner). One goroutine waits
// for it from the start, so the cleanup's kill, a SIGTERM's wait and the
// checks whether it exited never call Wait twice or read ProcessState
// while Wait writes it.
type child struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	waitErr error         // Wait's answer, once done is closed
}

// startChild starts cmd and the goroutine that waits for it.
func startChild(cmd *exec.Cmd) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait blocks until the process has ended and returns how it did.
func (c *child) wait() error {
	<-c.done
	return c.waitErr
}

// kill ends the process at once (nothing if it has ended).
func (c *child) kill() {
	if !c.exited() {
		c.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-c.done
}

// sigterm sends SIGTERM and returns a wait for the exit: past within, the
// process is killed and the wait answers an error.
func (c *child) sigterm() func(within time.Duration) error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	return func(within time.Duration) error {
		select {
		case <-c.done:
			return c.waitErr
		case <-time.After(within):
			c.kill()
			return fmt.Errorf("no exit within %v of SIGTERM", within)
		}
	}
}

// term sends SIGTERM and waits up to within for the exit.
func (c *child) term(within time.Duration) error { return c.sigterm()(within) }
