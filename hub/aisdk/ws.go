package aisdk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/hub/interop"
	"github.com/runhub/runhub/protocol"
)

// The AI SDK WebSocket chat transport (docs/integrations.md): GET
// /v1/aisdk/ws serves the protocol of the AI SDK's WebSocketChatTransport
// ("ai" 7.x: WebSocketChatTransportRequest / Response). One socket carries
// the UI message streams of many chats at once, each correlated by its
// requestId. A chunk's sequence is its index in the run's fold
// (hub/aisdk), so a resume with lastSequence continues with no gap or
// repeat. abort cancels the run its request streams; a socket that closes
// cancels nothing.

// AISDKSubprotocol is the WebSocket subprotocol of the AI SDK transport;
// a browser passes its token beside it as "bearer.<token>".
const AISDKSubprotocol = "runhub.aisdk"

// maxAISDKRequests bounds the streams one socket carries at once.
const maxAISDKRequests = 64

// wsToken is the token of a WebSocket upgrade: the Authorization header,
// else the access_token query parameter, else a "bearer.<token>"
// subprotocol (browsers cannot set handshake headers).
func wsToken(r *http.Request) string {
	if tok, ok := httpx.Bearer(r); ok {
		return tok
	}
	if tok := r.URL.Query().Get("access_token"); tok != "" {
		return tok
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), "bearer."); ok {
				return tok
			}
		}
	}
	return ""
}

// aisdkWS answers GET /v1/aisdk/ws.
func (h *edge) aisdkWS(c echo.Context) error {
	r, w := c.Request(), c.Response()
	if h.core.Draining() {
		return protocol.Errorf(protocol.CodeUnavailable, "the hub is shutting down")
	}
	if err := h.core.OriginAllowed(r); err != nil {
		return err
	}
	p, err := h.core.Authenticate(wsToken(r))
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="runhub"`)
		return err
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:   []string{AISDKSubprotocol},
		OriginPatterns: h.cfg.OriginPatterns,
	})
	if err != nil {
		return nil // Accept has answered
	}
	ws.SetReadLimit(h.cfg.MaxFrameBytes)
	ctx, cancel := httpx.StreamContext(context.Background(), h.core.Context(), p.Expires)
	s := &aisdkSocket{h: h, ws: ws, subject: p.Subject, p: p, ctx: ctx, cancel: cancel, reqs: map[string]*aisdkRequest{}}
	s.serve()
	return nil
}

// aisdkSocket is one AI SDK transport socket.
type aisdkSocket struct {
	h       *edge
	ws      *websocket.Conn
	subject string
	p       hub.Principal
	ctx     context.Context // ends with the socket, the hub or the credentials
	cancel  context.CancelFunc

	mu   sync.Mutex
	reqs map[string]*aisdkRequest // active streams by requestId
	wg   sync.WaitGroup           // the streams' goroutines
}

// aisdkRequest is one active stream of a socket.
type aisdkRequest struct {
	cancel context.CancelFunc
	run    string
}

// aisdkFrame is a client frame, loosely decoded: its fields are checked by
// kind as safeValidateWebSocketChatTransportRequest checks them.
type aisdkFrame struct {
	Type         *string         `json:"type"`
	RequestID    any             `json:"requestId"`
	ID           any             `json:"id"`
	Headers      json.RawMessage `json:"headers"`
	Body         json.RawMessage `json:"body"`
	LastSequence json.RawMessage `json:"lastSequence"`
	Trigger      any             `json:"trigger"`
	MessageID    json.RawMessage `json:"messageId"`
	Messages     json.RawMessage `json:"messages"`
}

func (s *aisdkSocket) serve() {
	// The socket closes when its context ends: the peer left (the read
	// fails, serve cancels), the credentials expired (4401) or the hub
	// stops (1012). Reads do not take that context: a cancelled read would
	// drop the connection without a close frame.
	closed := make(chan struct{})
	context.AfterFunc(s.ctx, func() {
		defer close(closed)
		switch {
		case errors.Is(s.ctx.Err(), context.DeadlineExceeded):
			s.ws.Close(websocket.StatusCode(protocol.CloseUnauthorized), "the token has expired")
		case s.h.core.Context().Err() != nil:
			s.ws.Close(websocket.StatusServiceRestart, "shutting down")
		default:
			s.ws.Close(websocket.StatusNormalClosure, "")
		}
	})
	defer func() {
		s.cancel()
		s.wg.Wait() // streams stop; their runs go on
		<-closed
	}()
	for {
		typ, data, err := s.ws.Read(context.Background())
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			s.send(map[string]any{"type": "error", "requestId": "", "errorText": "frames are JSON text"})
			continue
		}
		s.handle(data)
	}
}

// send writes one server frame; a failed write ends the socket.
func (s *aisdkSocket) send(frame any) {
	data, err := json.Marshal(frame)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.h.cfg.WriteTimeout)
	defer cancel()
	if s.ws.Write(ctx, websocket.MessageText, data) != nil {
		s.cancel()
	}
}

func (s *aisdkSocket) sendError(reqID, text string) {
	s.send(map[string]any{"type": "error", "requestId": reqID, "errorText": text})
}

// handle answers one client frame. A malformed frame gets an error frame
// for its requestId ("" when it has none); the socket and its other
// streams go on.
func (s *aisdkSocket) handle(data []byte) {
	var f aisdkFrame
	if err := json.Unmarshal(data, &f); err != nil || f.Type == nil {
		reqID := ""
		var loose map[string]any
		if json.Unmarshal(data, &loose) == nil {
			reqID, _ = loose["requestId"].(string)
		}
		s.sendError(reqID, "Invalid WebSocket chat request frame: want a JSON object with a string type")
		return
	}
	reqID, ok := f.RequestID.(string)
	if !ok {
		s.sendError("", "Invalid WebSocket chat request frame: requestId must be a string")
		return
	}
	if len(reqID) > protocol.MaxShortBytes {
		s.sendError(protocol.Truncate(reqID, protocol.MaxShortBytes), "requestId: is too long")
		return
	}
	if *f.Type == "abort" {
		s.abort(reqID)
		return
	}
	chat, ok := f.ID.(string)
	switch {
	case !ok:
		s.sendError(reqID, "id: must be a string (the chat id)")
		return
	case !isStringRecord(f.Headers):
		s.sendError(reqID, "headers: must be an object of strings")
		return
	case !isObject(f.Body):
		s.sendError(reqID, "body: must be an object")
		return
	}
	switch *f.Type {
	case "resume":
		after := int64(-1)
		if len(f.LastSequence) > 0 && string(f.LastSequence) != "null" {
			var n int64
			if json.Unmarshal(f.LastSequence, &n) != nil || n < 0 || n > 1<<53-1 {
				s.sendError(reqID, "lastSequence: must be a non-negative safe integer")
				return
			}
			after = n
		}
		s.resume(reqID, chat, after)
	case "send":
		trigger, _ := f.Trigger.(string)
		req := chatRequest{ID: &chat, Trigger: &trigger}
		if f.Trigger == nil {
			req.Trigger = nil
		}
		if len(f.MessageID) > 0 && string(f.MessageID) != "null" {
			var mid string
			if json.Unmarshal(f.MessageID, &mid) != nil {
				s.sendError(reqID, "messageId: must be a string")
				return
			}
		}
		if json.Unmarshal(f.Messages, &req.Messages) != nil {
			s.sendError(reqID, "messages: must be a non-empty array of UI messages")
			return
		}
		var body struct {
			Runhub json.RawMessage `json:"runhub"`
		}
		_ = json.Unmarshal(f.Body, &body)
		req.Runhub = body.Runhub
		s.start(reqID, &req)
	default:
		s.sendError(reqID, "type: must be send, resume or abort")
	}
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func isStringRecord(raw json.RawMessage) bool {
	var m map[string]string
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// start handles a send: a run of the chat's last user message.
func (s *aisdkSocket) start(reqID string, req *chatRequest) {
	text, err := checkChat(req, "")
	if err != nil {
		s.sendError(reqID, httpx.SafeMessage(err))
		return
	}
	if !s.reserve(reqID) {
		return
	}
	opts, err := interop.DecodeStartOptions(req.Runhub, "body.runhub")
	if err == nil {
		_, err = interop.ChatSession(s.ctx, s.h.core, s.subject, "id", *req.ID)
	}
	var res protocol.ControlResult
	if err == nil {
		ctx, cancel := context.WithTimeout(s.ctx, hub.ControlTimeout)
		res, err = interop.StartChatRun(ctx, s.h.core, s.subject, *req.ID, text, opts, nil)
		cancel()
	}
	if err == nil && res.Status != protocol.ResultAccepted {
		err = errors.New(res.Message)
	}
	if err != nil {
		s.release(reqID)
		msg := err.Error()
		var pe *protocol.Error
		if errors.As(err, &pe) {
			msg = pe.Message
		}
		s.sendError(reqID, msg)
		return
	}
	s.stream(reqID, res.RunID, -1)
}

// resume handles a resume: the chat's active run, after lastSequence.
func (s *aisdkSocket) resume(reqID, chat string, after int64) {
	meta, err := s.h.core.ReadSession(s.ctx, s.p, chat)
	if err == hub.ErrUnknown || (err == nil && meta.ActiveRun == "") {
		s.send(map[string]any{"type": "no-active", "requestId": reqID})
		return
	}
	if err != nil {
		s.sendError(reqID, httpx.SafeMessage(s.h.core.PublicError(err)))
		return
	}
	if !s.reserve(reqID) {
		return
	}
	s.stream(reqID, meta.ActiveRun, after)
}

// reserve registers requestId as active (refusing a duplicate, or one past
// the socket's bound).
func (s *aisdkSocket) reserve(reqID string) bool {
	s.mu.Lock()
	_, dup := s.reqs[reqID]
	full := len(s.reqs) >= maxAISDKRequests
	if !dup && !full {
		s.reqs[reqID] = &aisdkRequest{cancel: func() {}}
	}
	s.mu.Unlock()
	switch {
	case dup:
		s.sendError(reqID, "requestId: is already streaming")
	case full:
		s.sendError(reqID, "too many streams on this socket")
	}
	return !dup && !full
}

func (s *aisdkSocket) release(reqID string) {
	s.mu.Lock()
	delete(s.reqs, reqID)
	s.mu.Unlock()
}

// stream starts the goroutine that streams run rid for requestId.
func (s *aisdkSocket) stream(reqID, rid string, after int64) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.reqs[reqID] = &aisdkRequest{cancel: cancel, run: rid}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		s.send(map[string]any{"type": "start", "requestId": reqID})
		ended := s.h.aisdkPump(ctx, rid, after, func(seq int64, ch Chunk) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.send(map[string]any{"type": "chunk", "requestId": reqID, "sequence": seq, "chunk": ch})
			return s.ctx.Err()
		})
		s.mu.Lock()
		mine := s.reqs[reqID] != nil && s.reqs[reqID].run == rid
		if mine {
			delete(s.reqs, reqID)
		}
		s.mu.Unlock()
		switch {
		case ended && ctx.Err() == nil:
			s.send(map[string]any{"type": "end", "requestId": reqID})
		case !ended && ctx.Err() == nil && s.ctx.Err() == nil:
			s.sendError(reqID, "the run's events could not be read")
		}
	}()
}

// abort stops the stream of requestId and cancels its run (useChat's
// stop()). An unknown requestId is ignored: its stream has ended.
func (s *aisdkSocket) abort(reqID string) {
	s.mu.Lock()
	r := s.reqs[reqID]
	delete(s.reqs, reqID)
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	if r.run == "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, hub.ControlTimeout)
	defer cancel()
	m := protocol.Control{Type: protocol.MsgControl, ID: "aisdk", Op: protocol.OpCancel, RunID: r.run}
	if _, err := s.h.core.Control(ctx, s.subject, &m, ""); err != nil {
		s.h.core.Config().Logger.Info("aisdk abort: cancel failed", "run_id", r.run, "err", err)
	}
}
