package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Lines as Centrifugo v6 writes them (JSON protocol): replies to commands,
// the ping, publications, and pushes that end a subscription.
func TestCFClassify(t *testing.T) {
	data := `{"event_id":"r_1:7","seq":7,"run_id":"r_1","session_id":"s_1","type":"token.delta","created_at":1778750000.123456,"terminal":false,"payload":{"message_id":"m1","text":"w7 "}}`
	for _, tc := range []struct {
		line    string
		kind    cfKind
		id      uint32
		errCode int
		channel string
		data    string
	}{
		{line: `{}`, kind: cfPing},
		{line: " {} \r", kind: cfPing},
		{line: `{"id":1,"connect":{"client":"5e1c","version":"6.9.1","ping":25,"pong":true}}`, kind: cfReply, id: 1},
		{line: `{"id":2,"subscribe":{}}`, kind: cfReply, id: 2},
		{line: `{"id":2,"error":{"code":103,"message":"permission denied"}}`, kind: cfReply, id: 2, errCode: 103},
		{line: `{"push":{"channel":"load:3","pub":{"data":` + data + `,"offset":7}}}`, kind: cfPub, data: data + `,"offset":7}}}`},
		// Another field order takes the slow path and still finds the data.
		{line: `{"push":{"pub":{"offset":7,"data":` + data + `},"channel":"load:3"}}`, kind: cfPub, channel: "load:3", data: data},
		{line: `{"push":{"channel":"load:3","unsubscribe":{"code":2500,"reason":"server unsubscribe"}}}`, kind: cfDisconnect, channel: "load:3", errCode: 2500},
		{line: `{"push":{"disconnect":{"code":3001,"reason":"shutdown","reconnect":true}}}`, kind: cfDisconnect, errCode: 3001},
		{line: `{"push":{"channel":"load:3","join":{"info":{"user":"u"}}}}`, kind: cfOther},
		{line: `not json`, kind: cfOther},
		{line: `{"id":`, kind: cfOther},
	} {
		var l cfLine
		if k := cfClassify([]byte(tc.line), &l); k != tc.kind {
			t.Errorf("%s: kind %d, want %d", tc.line, k, tc.kind)
			continue
		}
		if l.ID != tc.id || l.ErrCode != tc.errCode || l.Channel != tc.channel || string(l.Data) != tc.data {
			t.Errorf("%s: got %+v (data %s)", tc.line, l, l.Data)
		}
	}
}

// A publish the stream writes, as the server pushes it back, is read by the
// hub's fast envelope parser: same seq, run and created_at.
func TestCFStreamRoundTrip(t *testing.T) {
	st := newCFStream("load:42")
	at := time.Unix(1778750000, 4500) // 4.5 µs: the fraction keeps its leading zeros
	body := cfBatchBody(nil, []*cfStream{st, st}, at)
	var req struct {
		Commands []struct {
			Publish struct {
				Channel string          `json:"channel"`
				Data    json.RawMessage `json:"data"`
			} `json:"publish"`
		} `json:"commands"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("batch body %s: %v", body, err)
	}
	if len(req.Commands) != 2 {
		t.Fatalf("%d commands", len(req.Commands))
	}
	for i, c := range req.Commands {
		if c.Publish.Channel != "load:42" {
			t.Errorf("channel %q", c.Publish.Channel)
		}
		line := `{"push":{"channel":"load:42","pub":{"data":` + string(c.Publish.Data) + `,"offset":9}}}`
		var l cfLine
		if cfClassify([]byte(line), &l) != cfPub {
			t.Fatalf("not a publication: %s", line)
		}
		var ev eventHead
		if !parseEventFast(l.Data, &ev) {
			t.Fatalf("fast parser refused %s", l.Data)
		}
		if ev.Seq != uint64(i+1) || ev.RunID != st.runID || ev.SessionID != st.sessID || ev.CreatedUS != at.UnixMicro() || ev.Terminal {
			t.Errorf("publish %d read back as %+v", i, ev)
		}
		if len(st.runID) != len("r_")+32 || len(st.sessID) != len("s_")+32 {
			t.Errorf("ids %q %q: want the hub's length", st.runID, st.sessID)
		}
	}
}

// A socket's messages: several lines per message, checked per stream.
func TestCFSockHandle(t *testing.T) {
	g := &gen{errs: map[string]int{}}
	s := &cfSock{g: g, channel: "load:0", sh: &g.shards[0], check: newSeqCheck()}
	st := newCFStream("load:0")
	pub := func() string {
		body := cfBatchBody(nil, []*cfStream{st}, time.Now())
		i := strings.Index(string(body), `"data":`)
		data := string(body[i+len(`"data":`) : len(body)-len("}]}")])
		return `{"push":{"channel":"load:0","pub":{"data":` + data + `,"offset":1}}}`
	}
	p1, p2 := pub(), pub()
	_ = pub() // seq 3 lost
	p4 := pub()
	lats := s.handle([]byte(p1+"\n"+p2+"\n"), time.Now().UnixMicro(), nil)
	lats = s.handle([]byte(p4+"\n"+p4+"\n"+`{"id":9,"subscribe":{}}`), time.Now().UnixMicro(), lats)
	if len(lats) != 4 || g.c.liveEvents.Load() != 4 {
		t.Errorf("%d latencies, %d events: want 4", len(lats), g.c.liveEvents.Load())
	}
	if g.c.gaps.Load() != 1 || g.c.dups.Load() != 1 {
		t.Errorf("gaps %d, dups %d: want 1 and 1", g.c.gaps.Load(), g.c.dups.Load())
	}
	s.handle([]byte(`{"push":{"channel":"load:0","unsubscribe":{"code":2500,"reason":"server unsubscribe"}}}`), 0, nil)
	if g.c.errorMsgs.Load() != 1 || len(g.errList) == 0 {
		t.Errorf("unsubscribe push not counted: %d, %v", g.c.errorMsgs.Load(), g.errList)
	}
}

func TestCFToken(t *testing.T) {
	secret := []byte("s3cret")
	exp := time.Unix(1900000000, 0)
	tok := cfToken(secret, "tab7", exp)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q", tok)
	}
	enc := base64.RawURLEncoding
	head, _ := enc.DecodeString(parts[0])
	var h map[string]string
	if json.Unmarshal(head, &h) != nil || h["alg"] != "HS256" || h["typ"] != "JWT" {
		t.Errorf("header %s", head)
	}
	claims, _ := enc.DecodeString(parts[1])
	var c struct {
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
	}
	if json.Unmarshal(claims, &c) != nil || c.Sub != "tab7" || c.Exp != exp.Unix() {
		t.Errorf("claims %s", claims)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if got, _ := enc.DecodeString(parts[2]); !hmac.Equal(got, mac.Sum(nil)) {
		t.Error("signature does not verify")
	}
}

func TestCFCommands(t *testing.T) {
	var c struct {
		ID      uint32            `json:"id"`
		Connect map[string]string `json:"connect"`
		Sub     map[string]string `json:"subscribe"`
	}
	if err := json.Unmarshal(cfConnectCmd(1, "tok", "lt"), &c); err != nil || c.ID != 1 || c.Connect["token"] != "tok" || c.Connect["name"] != "lt" {
		t.Errorf("connect: %+v %v", c, err)
	}
	if err := json.Unmarshal(cfSubscribeCmd(2, "load:1"), &c); err != nil || c.ID != 2 || c.Sub["channel"] != "load:1" {
		t.Errorf("subscribe: %+v %v", c, err)
	}
}

func TestCFConfigJSON(t *testing.T) {
	s := newCFServer("127.0.0.1:18000", 3000, 5*time.Minute)
	if len(s.APIKey) != 32 || len(s.HMACSecret) != 64 || s.APIKey == newCFServer("127.0.0.1:1", 1, time.Second).APIKey {
		t.Fatalf("secrets not random: %+v", s)
	}
	b, err := s.configJSON()
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		HTTPServer struct {
			Address string `json:"address"`
			Port    int    `json:"port"`
		} `json:"http_server"`
		Engine struct{ Type string } `json:"engine"`
		Client struct {
			Token struct {
				HMAC string `json:"hmac_secret_key"`
			} `json:"token"`
		} `json:"client"`
		Channel struct {
			Namespaces []struct {
				Name        string `json:"name"`
				Subscribe   bool   `json:"allow_subscribe_for_client"`
				HistorySize int    `json:"history_size"`
				HistoryTTL  string `json:"history_ttl"`
			} `json:"namespaces"`
		} `json:"channel"`
		HTTPAPI struct {
			Key string `json:"key"`
		} `json:"http_api"`
		Health struct {
			Enabled bool `json:"enabled"`
		} `json:"health"`
		UsageStats struct {
			Disabled bool `json:"disabled"`
		} `json:"usage_stats"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ns := c.Channel.Namespaces
	switch {
	case c.HTTPServer.Address != "127.0.0.1" || c.HTTPServer.Port != 18000:
		t.Errorf("http_server %+v", c.HTTPServer)
	case c.Engine.Type != "memory" || c.Client.Token.HMAC != s.HMACSecret || c.HTTPAPI.Key != s.APIKey:
		t.Errorf("engine, token or API key: %s", b)
	case len(ns) != 1 || ns[0].Name != "load" || !ns[0].Subscribe || ns[0].HistorySize != 3000 || ns[0].HistoryTTL != "5m0s":
		t.Errorf("namespaces %+v", ns)
	case !c.Health.Enabled || !c.UsageStats.Disabled:
		t.Errorf("health or usage stats: %s", b)
	}
	if bytes.Contains(b, []byte("ping_interval")) {
		t.Errorf("ping interval set without being asked: %s", b)
	}
	s.PingInterval, s.PongTimeout = time.Second, 500*time.Millisecond
	b, _ = s.configJSON()
	if !bytes.Contains(b, []byte(`"ping_interval": "1s"`)) || !bytes.Contains(b, []byte(`"pong_timeout": "500ms"`)) {
		t.Errorf("ping interval not in the client section: %s", b)
	}
	if got := s.cfChannel(7); got != "load:7" {
		t.Errorf("channel %q", got)
	}
	if _, err := (cfServer{Addr: "nohost"}).configJSON(); err == nil {
		t.Error("address without a port accepted")
	}
}

func TestCFBatchErrors(t *testing.T) {
	for _, tc := range []struct {
		body  string
		want  int
		n     int
		first string
	}{
		{`{"replies":[{"publish":{"offset":1}},{"publish":{}}]}`, 2, 0, ""},
		{`{"replies":[{"publish":{}},{"error":{"code":102,"message":"unknown channel"}}]}`, 2, 1, "publish: error 102 unknown channel"},
		{`{"replies":[{"publish":{}}]}`, 3, 2, "batch: 1 replies for 3 publishes"},
		{`{"error":{"code":107,"message":"bad request"}}`, 4, 4, "batch: error 107 bad request"},
		{`<html>`, 5, 5, "batch answer"},
	} {
		n, first := cfBatchErrors([]byte(tc.body), tc.want)
		if n != tc.n || !strings.HasPrefix(first, tc.first) {
			t.Errorf("%s: %d %q, want %d %q", tc.body, n, first, tc.n, tc.first)
		}
	}
}
