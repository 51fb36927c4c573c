package netfault

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The delay line: the node's INPUT queues every packet (NFQUEUE) to a
// netlink socket of this process, opened in the node's namespace; each
// packet is accepted Delay after it arrived. The netfilter queue protocol
// (nfnetlink_queue): a config message binds the queue and asks for the
// packets' metadata only; each queued packet arrives as a message carrying
// its id; a verdict message names the id and what to do with it.

const (
	queueNum = 0 // per namespace: each node has its own

	nfnlSubsysQueue = 3
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaPacketHdr   = 1
	nfqaVerdictHdr  = 2
	nfqaCfgCmd      = 1
	nfqaCfgParams   = 2
	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1
	nfAccept        = 1
)

type delayLine struct {
	fd    int
	delay time.Duration
	mu    sync.Mutex
	done  bool
	wg    sync.WaitGroup
	seq   uint32
}

func newDelayLine(nd *Node, delay time.Duration) (*delayLine, error) {
	d := &delayLine{fd: -1, delay: delay}
	err := nd.in(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		d.fd = fd
		return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	})
	if err != nil {
		if d.fd >= 0 {
			unix.Close(d.fd)
		}
		return nil, err
	}
	unix.SetsockoptInt(d.fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	unix.SetsockoptInt(d.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	// Reads wake every 100 ms, so close can stop the loop before it closes
	// the socket.
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(d.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	// Bind the queue, then ask for metadata only (no payload copied).
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, 0} // command, pad, pf (unused)
	if err := d.send(nfqnlMsgConfig, attr(nfqaCfgCmd, cmd)); err != nil {
		d.closeFD()
		return nil, fmt.Errorf("bind queue: %w", err)
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0)
	params[4] = nfqnlCopyMeta
	if err := d.send(nfqnlMsgConfig, attr(nfqaCfgParams, params)); err != nil {
		d.closeFD()
		return nil, fmt.Errorf("queue params: %w", err)
	}
	d.wg.Add(1)
	go d.loop()
	return d, nil
}

// attr is one netlink attribute, padded to 4 bytes.
func attr(typ uint16, data []byte) []byte {
	l := 4 + len(data)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], data)
	return b
}

// send writes one nfnetlink message of the queue subsystem.
func (d *delayLine) send(msg uint16, attrs ...[]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return errors.New("closed")
	}
	d.seq++
	n := 16 + 4
	for _, a := range attrs {
		n += len(a)
	}
	b := make([]byte, 16, n)
	binary.NativeEndian.PutUint32(b, uint32(n))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msg)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], d.seq)
	// nfgenmsg: family AF_UNSPEC, version 0, the queue number (big endian)
	b = append(b, unix.AF_UNSPEC, 0, byte(queueNum>>8), byte(queueNum&0xff))
	for _, a := range attrs {
		b = append(b, a...)
	}
	return unix.Sendto(d.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// loop reads queued packets and accepts each after the delay.
func (d *delayLine) loop() {
	defer d.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		d.mu.Lock()
		done := d.done
		d.mu.Unlock()
		if done {
			return
		}
		n, _, err := unix.Recvfrom(d.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return
		}
		for b := buf[:n]; len(b) >= 16; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < 16 || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			if typ == nfnlSubsysQueue<<8|nfqnlMsgPacket && l >= 20 {
				if id, ok := packetID(b[20:l]); ok {
					time.AfterFunc(d.delay, func() { d.accept(id) })
				}
			}
			b = b[(l+3)&^3:]
		}
	}
}

// packetID finds the packet header attribute's id.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs))
		typ := binary.NativeEndian.Uint16(attrs[2:]) & 0x3fff
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if typ == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		attrs = attrs[(l+3)&^3:]
	}
	return 0, false
}

func (d *delayLine) accept(id uint32) {
	v := make([]byte, 8)
	binary.BigEndian.PutUint32(v, nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	d.send(nfqnlMsgVerdict, attr(nfqaVerdictHdr, v)) // closed: the packet is gone, as lost
}

// closeFD closes the socket of a line whose loop never started.
func (d *delayLine) closeFD() {
	d.mu.Lock()
	d.done = true
	d.mu.Unlock()
	unix.Close(d.fd)
}

// close stops the line: packets still held are dropped (as lost), and
// with the queue unbound the node's NFQUEUE rule lets packets through.
func (d *delayLine) close() {
	d.mu.Lock()
	d.done = true // verdicts due later are not sent; the loop ends
	d.mu.Unlock()
	d.wg.Wait()
	unix.Close(d.fd)
}
