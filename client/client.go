// Package client is a small Go client of the hub's tab socket (GET /v1/ws,
// protocol runhub.v1), used by tests and the load generator.
//
// A Conn owns one reader goroutine that decodes every server frame (NDJSON
// batches included), answers waiting Control calls with their
// control_result, and queues every other message for Next. Close stops it.
// Methods are safe for concurrent use.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/runhub/runhub/protocol"
)

// Options configure Dial.
type Options struct {
	Token      string       // hello.token
	ClientName string       // hello.client (default "runhub-go")
	Header     http.Header  // extra upgrade headers (Origin, Authorization)
	Inbox      int          // messages buffered for Next (default 4096); a full inbox stops reading
	ReadLimit  int64        // largest server frame (default 16 MiB)
	HTTPClient *http.Client // for the upgrade request (default http.DefaultClient)
}

// Conn is one tab socket.
type Conn struct {
	ws      *websocket.Conn
	Welcome protocol.Welcome

	inbox    chan any
	closing  chan struct{} // closed by Close: a read loop waiting on a full inbox gives up
	closeMu  sync.Once
	done     chan struct{}
	err      error // why the reader stopped; read after done is closed
	nextID   atomic.Uint64
	idPrefix string // random per connection: control ids double as idempotency keys

	mu      sync.Mutex
	pending map[string]chan protocol.ControlResultMessage
	errs    map[string]chan protocol.ErrorMessage
}

// ErrClosed is returned after the socket has closed.
var ErrClosed = errors.New("client: connection closed")

// Dial connects to url (ws://host/v1/ws), sends hello and waits for welcome.
func Dial(ctx context.Context, url string, opts Options) (*Conn, error) {
	if opts.ClientName == "" {
		opts.ClientName = "runhub-go"
	}
	if opts.Inbox == 0 {
		opts.Inbox = 4096
	}
	if opts.ReadLimit == 0 {
		opts.ReadLimit = 16 << 20
	}
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{protocol.SubprotocolV1}, HTTPHeader: opts.Header, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(opts.ReadLimit)
	c := &Conn{ws: ws, inbox: make(chan any, opts.Inbox), done: make(chan struct{}), closing: make(chan struct{}), idPrefix: "go" + strconv.FormatUint(rand.Uint64(), 36) + "-",
		pending: map[string]chan protocol.ControlResultMessage{}, errs: map[string]chan protocol.ErrorMessage{}}
	if err := c.Send(ctx, protocol.Hello{Type: protocol.MsgHello, Token: opts.Token, Client: opts.ClientName}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	go c.readLoop()
	m, err := c.Next(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	w, ok := m.(*protocol.Welcome)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("client: want welcome, got %T %+v", m, m)
	}
	c.Welcome = *w
	return c, nil
}

// Send writes one message as one frame.
func (c *Conn) Send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// SendRaw writes raw bytes as one text frame.
func (c *Conn) SendRaw(ctx context.Context, b []byte) error {
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// Watch watches sessions (or all of the caller's).
func (c *Conn) Watch(ctx context.Context, all bool, sessions ...string) error {
	return c.Send(ctx, protocol.Watch{Type: protocol.MsgWatch, All: all, Sessions: sessions})
}

// Unwatch stops watching sessions (or all).
func (c *Conn) Unwatch(ctx context.Context, all bool, sessions ...string) error {
	return c.Send(ctx, protocol.Watch{Type: protocol.MsgUnwatch, All: all, Sessions: sessions})
}

// Focus focuses a session ("" = none) from cursor ("" = its latest run).
func (c *Conn) Focus(ctx context.Context, sessionID, cursor string) error {
	f := protocol.Focus{Type: protocol.MsgFocus, Cursor: cursor}
	if sessionID != "" {
		f.SessionID = &sessionID
	}
	return c.Send(ctx, f)
}

// Control sends a control (its ID is set when empty) and waits for its
// control_result. An error message naming the control's id ends the wait
// with that error as a *protocol.Error.
func (c *Conn) Control(ctx context.Context, m protocol.Control) (protocol.ControlResult, error) {
	m.Type = protocol.MsgControl
	if m.ID == "" {
		m.ID = c.idPrefix + strconv.FormatUint(c.nextID.Add(1), 10)
	}
	ch := make(chan protocol.ControlResultMessage, 1)
	ech := make(chan protocol.ErrorMessage, 1)
	c.mu.Lock()
	c.pending[m.ID], c.errs[m.ID] = ch, ech
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, m.ID)
		delete(c.errs, m.ID)
		c.mu.Unlock()
	}()
	if err := c.Send(ctx, m); err != nil {
		return protocol.ControlResult{}, err
	}
	select {
	case r := <-ch:
		return r.ControlResult, nil
	case e := <-ech:
		// the control_result follows the error; prefer the error
		return protocol.ControlResult{}, &protocol.Error{Code: e.Code, Message: e.Message}
	case <-c.done:
		return protocol.ControlResult{}, c.closedErr()
	case <-ctx.Done():
		return protocol.ControlResult{}, ctx.Err()
	}
}

// Next returns the next message other than an awaited control_result:
// *protocol.Welcome, *StatusMessage, *EventMessage, *Replayed,
// *ControlResultMessage (unawaited), *ErrorMessage, *Pong or *Goaway.
func (c *Conn) Next(ctx context.Context) (any, error) {
	select {
	case m := <-c.inbox:
		return m, nil
	default:
	}
	select {
	case m := <-c.inbox:
		return m, nil
	case <-c.done:
		select {
		case m := <-c.inbox:
			return m, nil
		default:
		}
		return nil, c.closedErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the socket has stopped reading.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the socket stopped (after Done).
func (c *Conn) Err() error { return c.closedErr() }

func (c *Conn) closedErr() error {
	select {
	case <-c.done:
		if c.err != nil {
			return c.err
		}
	default:
	}
	return ErrClosed
}

// Close closes the socket normally and waits for the reader.
func (c *Conn) Close() error {
	c.closeMu.Do(func() { close(c.closing) })
	err := c.ws.Close(websocket.StatusNormalClosure, "bye")
	<-c.done
	return err
}

func (c *Conn) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		for _, line := range protocol.SplitBatch(data) {
			m, err := protocol.DecodeServer(line)
			if err != nil {
				c.err = fmt.Errorf("client: undecodable server message %q: %w", line, err)
				c.ws.CloseNow()
				return
			}
			if c.route(m) {
				continue
			}
			select {
			case c.inbox <- m:
			case <-c.closing:
				// Nobody reads the inbox any more: Close must not wait on it.
				c.ws.CloseNow()
				return
			}
		}
	}
}

// route hands control results and errors to waiting Control calls.
func (c *Conn) route(m any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch t := m.(type) {
	case *protocol.ControlResultMessage:
		if ch, ok := c.pending[t.ID]; ok {
			ch <- *t
			delete(c.pending, t.ID)
			return true
		}
	case *protocol.ErrorMessage:
		if ch, ok := c.errs[t.Ref]; ok && t.Ref != "" {
			ch <- *t
			delete(c.errs, t.Ref)
			delete(c.pending, t.Ref)
			return true
		}
	}
	return false
}

// CloseStatus returns the WebSocket close code of err, or -1.
func CloseStatus(err error) int { return int(websocket.CloseStatus(err)) }
