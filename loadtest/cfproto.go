package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"
)

// This file is the part of Centrifugo's client protocol (v2, JSON format,
// over WebSocket at /connection/websocket) and of its server API that the
// comparison needs, written from the protocol's schema and documentation:
//
//   - A client sends Commands, {"id":N,"connect":{…}} or
//     {"id":N,"subscribe":{"channel":…}}; the server answers each with a
//     Reply carrying the same id and a field of the same name, or "error".
//   - Asynchronous pushes are Replies without id: {"push":{"channel":…,
//     "pub":{"data":<the published JSON, embedded>,"offset":N}}}, or
//     "disconnect", "unsubscribe", … in place of "pub".
//   - A WebSocket message may hold several Replies, one JSON object per line.
//   - The server pings with an empty Reply, {}, and expects an empty Command,
//     {}, back before its pong timeout; an unasked-for {} disconnects.
//   - The HTTP API takes POST /api/batch {"commands":[{"publish":{"channel":
//     …,"data":…}},…]} with the key in the X-API-Key header and answers
//     {"replies":[{"publish":{…}}|{"error":{…}},…]}.

// cfKind is what one line of a Centrifugo WebSocket message is.
type cfKind int

const (
	cfOther      cfKind = iota
	cfPing              // {}: answer {}
	cfReply             // a reply to a command (id > 0)
	cfPub               // a publication pushed on a channel
	cfDisconnect        // a disconnect or unsubscribe push: the server dropped us
)

// cfLine is the decoded part of a line the generator looks at.
type cfLine struct {
	ID      uint32
	ErrCode int
	ErrMsg  string
	Channel string
	Data    []byte // cfPub: the publication's data (points into the line)
}

var (
	cfPingLine   = []byte(`{}`)
	cfPrefixPush = []byte(`{"push":{`)
	cfKeyPubData = []byte(`"pub":{"data":`)
)

// cfClassify reads one line. Publications take a fast path (the server
// writes a Push's fields in schema order: channel, then pub with data
// first), anything else goes through encoding/json.
func cfClassify(line []byte, l *cfLine) cfKind {
	line = bytes.TrimSpace(line)
	*l = cfLine{}
	if bytes.Equal(line, cfPingLine) {
		return cfPing
	}
	if bytes.HasPrefix(line, cfPrefixPush) {
		if i := bytes.Index(line, cfKeyPubData); i >= 0 {
			l.Data = line[i+len(cfKeyPubData):]
			return cfPub
		}
	}
	var m struct {
		ID    uint32 `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Push *struct {
			Channel string `json:"channel"`
			Pub     *struct {
				Data json.RawMessage `json:"data"`
			} `json:"pub"`
			Disconnect  *cfCodeReason `json:"disconnect"`
			Unsubscribe *cfCodeReason `json:"unsubscribe"`
		} `json:"push"`
	}
	if json.Unmarshal(line, &m) != nil {
		return cfOther
	}
	l.ID = m.ID
	if m.Error != nil {
		l.ErrCode, l.ErrMsg = m.Error.Code, m.Error.Message
	}
	switch p := m.Push; {
	case m.ID > 0:
		return cfReply
	case p == nil:
		return cfOther
	case p.Pub != nil:
		l.Channel, l.Data = p.Channel, p.Pub.Data
		return cfPub
	case p.Disconnect != nil:
		l.Channel, l.ErrCode, l.ErrMsg = p.Channel, p.Disconnect.Code, "disconnect: "+p.Disconnect.Reason
		return cfDisconnect
	case p.Unsubscribe != nil:
		l.Channel, l.ErrCode, l.ErrMsg = p.Channel, p.Unsubscribe.Code, "unsubscribe: "+p.Unsubscribe.Reason
		return cfDisconnect
	}
	return cfOther
}

type cfCodeReason struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// cfConnectCmd is the connect command with a connection token.
func cfConnectCmd(id uint32, token, name string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "connect": map[string]string{"token": token, "name": name}})
	return b
}

// cfSubscribeCmd is the subscribe command for one channel.
func cfSubscribeCmd(id uint32, channel string) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "subscribe": map[string]string{"channel": channel}})
	return b
}

// cfToken is a connection JWT (HS256) for user sub, valid until exp.
func cfToken(secret []byte, sub string, exp time.Time) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"sub": sub, "exp": exp.Unix()})
	msg := head + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

// cfServer is the Centrifugo configuration the generator writes.
type cfServer struct {
	Addr        string // 127.0.0.1:port
	APIKey      string
	HMACSecret  string
	Namespace   string // channels are Namespace:i
	HistorySize int
	HistoryTTL  time.Duration
	// PingInterval and PongTimeout replace Centrifugo's defaults (25 s,
	// 8 s) when set: the integration test pings every second.
	PingInterval, PongTimeout time.Duration
}

// newCFServer makes random secrets for one run.
func newCFServer(addr string, historySize int, historyTTL time.Duration) cfServer {
	return cfServer{Addr: addr, APIKey: randHex(16), HMACSecret: randHex(32), Namespace: "load",
		HistorySize: historySize, HistoryTTL: historyTTL}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// configJSON is a Centrifugo v6 configuration file: the HTTP server on the
// loopback address only, the memory engine, connection tokens signed with
// HMACSecret, one namespace whose channels authenticated clients may
// subscribe to, with history (as the hub journals every event), the HTTP
// API behind APIKey, the health endpoint (readiness), and no usage
// statistics sent anywhere.
func (s cfServer) configJSON() ([]byte, error) {
	host, port, err := splitHostPort(s.Addr)
	if err != nil {
		return nil, err
	}
	client := map[string]any{"token": map[string]any{"hmac_secret_key": s.HMACSecret}}
	if s.PingInterval > 0 {
		client["ping_interval"], client["pong_timeout"] = s.PingInterval.String(), s.PongTimeout.String()
	}
	cfg := map[string]any{
		"http_server": map[string]any{"address": host, "port": port},
		"log":         map[string]any{"level": "error"},
		"engine":      map[string]any{"type": "memory"},
		"client":      client,
		"channel": map[string]any{"namespaces": []any{map[string]any{
			"name": s.Namespace, "allow_subscribe_for_client": true,
			"history_size": s.HistorySize, "history_ttl": s.HistoryTTL.String(),
		}}},
		"http_api":    map[string]any{"key": s.APIKey},
		"health":      map[string]any{"enabled": true},
		"usage_stats": map[string]any{"disabled": true},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, fmt.Errorf("address %q: bad port", addr)
	}
	return host, p, nil
}

// cfChannel is the name of channel i.
func (s cfServer) cfChannel(i int) string { return s.Namespace + ":" + strconv.Itoa(i) }

// cfStream is one channel's publications: the data of each is an event
// envelope shaped like the hub's token.delta events (same fields, ids of
// the same length), so the frames are about as large and the generator
// checks them with the same parser (parseEventFast) and the same
// per-stream sequence check.
type cfStream struct {
	channel string
	runID   string // r_ + 32 hex, like the hub's run ids
	sessID  string
	seq     uint64
}

func newCFStream(channel string) *cfStream {
	return &cfStream{channel: channel, runID: "r_" + randHex(16), sessID: "s_" + randHex(16)}
}

// appendPublish appends the next publish command of the stream (its data
// stamped created_at = now) to b.
func (st *cfStream) appendPublish(b []byte, now time.Time) []byte {
	st.seq++
	seq := strconv.FormatUint(st.seq, 10)
	b = append(b, `{"publish":{"channel":`...)
	b = strconv.AppendQuote(b, st.channel)
	b = append(b, `,"data":{"event_id":"`...)
	b = append(b, st.runID...)
	b = append(b, ':')
	b = append(b, seq...)
	b = append(b, `","seq":`...)
	b = append(b, seq...)
	b = append(b, `,"run_id":"`...)
	b = append(b, st.runID...)
	b = append(b, `","session_id":"`...)
	b = append(b, st.sessID...)
	b = append(b, `","type":"token.delta","created_at":`...)
	us := now.UnixMicro()
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, '.')
	frac := strconv.FormatInt(us%1e6+1e6, 10) // 1xxxxxx: keeps the leading zeros
	b = append(b, frac[1:]...)
	b = append(b, `,"terminal":false,"payload":{"message_id":"m1","text":"w`...)
	b = append(b, seq...)
	b = append(b, ` "}}}}`...)
	return b
}

// cfBatchBody is POST /api/batch's body for one publish per stream.
func cfBatchBody(b []byte, streams []*cfStream, now time.Time) []byte {
	b = append(b[:0], `{"commands":[`...)
	for i, st := range streams {
		if i > 0 {
			b = append(b, ',')
		}
		b = st.appendPublish(b, now)
	}
	return append(b, "]}"...)
}

// cfBatchErrors counts the replies of a batch answer that carry an error,
// and returns the first error's text.
func cfBatchErrors(body []byte, want int) (int, string) {
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Replies []struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"replies"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return want, fmt.Sprintf("batch answer: %v: %.200s", err, body)
	}
	if m.Error != nil {
		return want, fmt.Sprintf("batch: error %d %s", m.Error.Code, m.Error.Message)
	}
	n, first := 0, ""
	for _, r := range m.Replies {
		if r.Error != nil {
			if n == 0 {
				first = fmt.Sprintf("publish: error %d %s", r.Error.Code, r.Error.Message)
			}
			n++
		}
	}
	if len(m.Replies) != want {
		n += max(0, want-len(m.Replies))
		if first == "" {
			first = fmt.Sprintf("batch: %d replies for %d publishes", len(m.Replies), want)
		}
	}
	return n, first
}
