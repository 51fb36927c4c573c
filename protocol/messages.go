package protocol

import "encoding/json"

// Client → hub message types.
const (
	MsgHello   = "hello"
	MsgWatch   = "watch"
	MsgUnwatch = "unwatch"
	MsgFocus   = "focus"
	MsgControl = "control"
	MsgPing    = "ping"
)

// Hub → client message types.
const (
	MsgWelcome       = "welcome"
	MsgStatus        = "status"
	MsgEvent         = "event"
	MsgReplayed      = "replayed"
	MsgControlResult = "control_result"
	MsgError         = "error"
	MsgPong          = "pong"
	MsgGoaway        = "goaway"
)

// SubprotocolV1 is the WebSocket subprotocol of protocol v1.
const SubprotocolV1 = "runhub.v1"

// ClientMessage is one decoded client → hub message: exactly one of the
// pointer fields is set, matching Type.
type ClientMessage struct {
	Type    string
	Hello   *Hello
	Watch   *Watch // also for unwatch
	Focus   *Focus
	Control *Control
	Ping    *Ping
}

// Hello must be the first message on a socket.
type Hello struct {
	Type   string `json:"type"`
	Token  string `json:"token,omitempty"`
	Client string `json:"client,omitempty"`
	// Capabilities are the optional protocol features the client takes
	// (CapCompactReplay); unknown names are ignored. At most MaxCapabilities
	// of at most MaxShortBytes each.
	Capabilities []string `json:"capabilities,omitempty"`
}

// Client capabilities (hello.capabilities).
const (
	// CapCompactReplay: journal catch-up may send Compacted records (runs
	// of token.delta / reasoning.delta of one message merged into one).
	CapCompactReplay = "compact_replay"
)

// MaxCapabilities bounds hello.capabilities.
const MaxCapabilities = 16

// Watch (and unwatch) names sessions, or all of the caller's.
type Watch struct {
	Type     string   `json:"type"`
	Sessions []string `json:"sessions,omitempty"`
	All      bool     `json:"all,omitempty"`
}

// Focus makes one session (or none, when SessionID is nil) the focused one.
type Focus struct {
	Type      string  `json:"type"`
	SessionID *string `json:"session_id"`
	Cursor    string  `json:"cursor,omitempty"`
}

// Control is one control request; which fields matter depends on Op.
type Control struct {
	Type        string          `json:"type"`
	ID          string          `json:"id"`
	Op          string          `json:"op"`
	SessionID   string          `json:"session_id,omitempty"`
	RunID       string          `json:"run_id,omitempty"`
	Message     string          `json:"message,omitempty"`
	Attachments []Attachment    `json:"attachments,omitempty"`
	Workspace   string          `json:"workspace,omitempty"`
	Profile     string          `json:"profile,omitempty"`
	Provider    string          `json:"provider,omitempty"`
	Model       string          `json:"model,omitempty"`
	Toolsets    []string        `json:"toolsets,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	ApprovalID  string          `json:"approval_id,omitempty"`
	Choice      string          `json:"choice,omitempty"`
	ClarifyID   string          `json:"clarify_id,omitempty"`
	Response    string          `json:"response,omitempty"`
	Mode        string          `json:"mode,omitempty"`
	Action      string          `json:"action,omitempty"`
	Text        string          `json:"text,omitempty"`
}

// StartRequest converts a start control to a StartRunRequest.
func (c *Control) StartRequest() StartRunRequest {
	return StartRunRequest{SessionID: c.SessionID, Message: c.Message, Attachments: c.Attachments,
		Workspace: c.Workspace, Profile: c.Profile, Provider: c.Provider, Model: c.Model,
		Toolsets: c.Toolsets, Source: "user", Metadata: c.Metadata}
}

// Ping asks for a pong.
type Ping struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
}

// Limits tells a client the bounds the hub enforces.
type Limits struct {
	MaxFrameBytes     int `json:"max_frame_bytes"`
	MaxWatch          int `json:"max_watch"`
	MaxMessageBytes   int `json:"max_message_bytes"`
	StatusIntervalMS  int `json:"status_interval_ms"`
	PingIntervalMS    int `json:"ping_interval_ms,omitempty"`
	MessagesPerSecond int `json:"messages_per_second,omitempty"`
}

// Welcome answers hello.
type Welcome struct {
	Type     string `json:"type"`
	Protocol string `json:"protocol"`
	ConnID   string `json:"conn_id"`
	HubID    string `json:"hub_id"`
	Subject  string `json:"subject"`
	Limits   Limits `json:"limits"`
	// Capabilities are the hello's capabilities this hub honours on the
	// socket (opt: omitted when none).
	Capabilities []string `json:"capabilities,omitempty"`
}

// StatusMessage carries one session's status.
type StatusMessage struct {
	Type    string         `json:"type"`
	Session *SessionStatus `json:"session"`
}

// EventMessage carries one event of the focused session.
type EventMessage struct {
	Type  string    `json:"type"`
	Event *Envelope `json:"event"`
}

// Replayed marks the end of a focus replay.
type Replayed struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Cursor    string `json:"cursor"`
	Count     int    `json:"count"`
}

// ControlResultMessage answers a control with the control's id.
type ControlResultMessage struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	ControlResult
}

// ErrorMessage reports bad input or a failure; Ref is the offending
// message's id or type.
type ErrorMessage struct {
	Type    string `json:"type"`
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Ref     string `json:"ref,omitempty"`
	// Sessions lists the session ids the error is about, when there are
	// any: a watch answers all of its unknown ids with one error.
	Sessions []string `json:"sessions,omitempty"`
}

// Pong answers ping.
type Pong struct {
	Type string  `json:"type"`
	ID   string  `json:"id,omitempty"`
	Time float64 `json:"time"`
}

// Goaway tells a client the hub is going away and when to reconnect.
type Goaway struct {
	Type             string `json:"type"`
	Reason           string `json:"reason"`
	ReconnectAfterMS int    `json:"reconnect_after_ms"`
}

// WebSocket close codes used by the hub.
const (
	CloseNormal         = 1000
	ClosePolicy         = 1008 // floods, protocol abuse
	CloseTooBig         = 1009 // frame over the size limit
	CloseInternal       = 1011
	CloseServiceRestart = 1012 // after goaway
	CloseSlowConsumer   = 4008 // the client stopped reading
	CloseUnauthorized   = 4401
	CloseProtocol       = 4400 // first message was not hello
)

// EncodeEvent appends the wire form of an event message for e to dst:
// {"type":"event","event":<envelope>}. The envelope is marshalled once and
// the result can be sent to any number of sockets.
func EncodeEvent(dst []byte, e *Envelope) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"type":"event","event":`...)
	dst = append(dst, b...)
	return append(dst, '}'), nil
}
