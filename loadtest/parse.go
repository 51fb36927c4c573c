package main

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// msgKind is what a server message is, as far as the generator cares.
type msgKind int

const (
	kindOther msgKind = iota
	kindEvent
	kindStatus
	kindReplayed
	kindError
	kindWelcome
	kindGoaway
)

// eventHead is the part of an event envelope the generator checks.
type eventHead struct {
	RunID     string
	SessionID string
	Seq       uint64
	SeqFrom   uint64 // a compacted record covers SeqFrom..Seq; 0 on one event
	CreatedUS int64  // created_at in Unix microseconds
	Terminal  bool
}

// other is the generic decode of the rarer messages.
type other struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Cursor    string `json:"cursor"`
	Count     int    `json:"count"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Ref       string `json:"ref"`
}

var (
	prefixEvent  = []byte(`{"type":"event","event":{`)
	prefixStatus = []byte(`{"type":"status",`)
	keyPayload   = []byte(`"payload":`)
	keySeq       = []byte(`"seq":`)
	keySeqFrom   = []byte(`"seq_from":`)
	keyRunID     = []byte(`"run_id":"`)
	keySession   = []byte(`"session_id":"`)
	keyCreatedAt = []byte(`"created_at":`)
	keyTerminal  = []byte(`"terminal":`)
)

// classify looks at one NDJSON line. Events take a fast path that reads
// only the envelope fields before "payload" (the hub encodes the envelope
// with json.Marshal, so its fields come in declaration order); anything
// unexpected falls back to encoding/json. Statuses are counted, not decoded.
func classify(line []byte, ev *eventHead, o *other) msgKind {
	if bytes.HasPrefix(line, prefixEvent) {
		if parseEventFast(line[len(prefixEvent)-1:], ev) {
			return kindEvent
		}
		if parseEventSlow(line, ev) {
			return kindEvent
		}
		return kindOther
	}
	if bytes.HasPrefix(line, prefixStatus) {
		return kindStatus
	}
	*o = other{}
	if json.Unmarshal(line, o) != nil {
		return kindOther
	}
	switch o.Type {
	case "event":
		if parseEventSlow(line, ev) {
			return kindEvent
		}
	case "status":
		return kindStatus
	case "replayed":
		return kindReplayed
	case "error":
		return kindError
	case "welcome":
		return kindWelcome
	case "goaway":
		return kindGoaway
	}
	return kindOther
}

func parseEventFast(env []byte, ev *eventHead) bool {
	head := env
	if i := bytes.Index(env, keyPayload); i >= 0 {
		head = env[:i]
	}
	var ok bool
	if ev.Seq, ok = uintAfter(head, keySeq); !ok {
		return false
	}
	ev.SeqFrom = seqFromTail(env)
	if ev.RunID, ok = strAfter(head, keyRunID); !ok {
		return false
	}
	if ev.SessionID, ok = strAfter(head, keySession); !ok {
		return false
	}
	if ev.CreatedUS, ok = microsAfter(head, keyCreatedAt); !ok {
		return false
	}
	i := bytes.Index(head, keyTerminal)
	if i < 0 {
		return false
	}
	ev.Terminal = bytes.HasPrefix(head[i+len(keyTerminal):], []byte("true"))
	return true
}

func parseEventSlow(line []byte, ev *eventHead) bool {
	var m struct {
		Event struct {
			RunID     string      `json:"run_id"`
			SessionID string      `json:"session_id"`
			Seq       uint64      `json:"seq"`
			SeqFrom   uint64      `json:"seq_from"`
			CreatedAt json.Number `json:"created_at"`
			Terminal  bool        `json:"terminal"`
		} `json:"event"`
	}
	if json.Unmarshal(line, &m) != nil || m.Event.RunID == "" {
		return false
	}
	us, ok := parseMicros([]byte(m.Event.CreatedAt.String()))
	if !ok {
		return false
	}
	*ev = eventHead{RunID: m.Event.RunID, SessionID: m.Event.SessionID, Seq: m.Event.Seq, SeqFrom: m.Event.SeqFrom, CreatedUS: us, Terminal: m.Event.Terminal}
	return true
}

// seqFromTail reads a compacted record's seq_from: the envelope's last
// member (protocol.Compacted encodes it after the payload), so the
// envelope ends `,"seq_from":N}`. 0 when there is none.
func seqFromTail(env []byte) uint64 {
	i := bytes.LastIndex(env, keySeqFrom)
	if i < 0 {
		return 0
	}
	v, ok := uintAfter(env[i:], keySeqFrom)
	rest := env[i+len(keySeqFrom):]
	for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
		rest = rest[1:]
	}
	if r := string(rest); !ok || r != "}" && r != "}}" {
		return 0
	}
	return v
}

func uintAfter(b, key []byte) (uint64, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	var v uint64
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		v = v*10 + uint64(b[n]-'0')
		n++
	}
	return v, n > 0
}

func strAfter(b, key []byte) (string, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return "", false
	}
	b = b[i+len(key):]
	j := bytes.IndexByte(b, '"')
	if j < 0 || bytes.IndexByte(b[:j], '\\') >= 0 {
		return "", false
	}
	return string(b[:j]), true
}

func microsAfter(b, key []byte) (int64, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
		j++
	}
	return parseMicros(b[:j])
}

// parseMicros converts a JSON number of Unix seconds with fractions to
// microseconds without going through float64 (which loses the last digit
// of a 16-digit timestamp). Exponent forms fall back to ParseFloat.
func parseMicros(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	if bytes.ContainsAny(b, "eE") {
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return 0, false
		}
		return int64(f*1e6 + 0.5), true
	}
	var sec, frac int64
	digits := 0
	i := 0
	for ; i < len(b) && b[i] != '.'; i++ {
		if b[i] < '0' || b[i] > '9' {
			return 0, false
		}
		sec = sec*10 + int64(b[i]-'0')
	}
	if i < len(b) {
		for i++; i < len(b); i++ {
			if b[i] < '0' || b[i] > '9' {
				return 0, false
			}
			if digits < 6 {
				frac = frac*10 + int64(b[i]-'0')
				digits++
			}
		}
	}
	for ; digits < 6; digits++ {
		frac *= 10
	}
	return sec*1_000_000 + frac, true
}

// seqCheck verifies one socket's focus stream. A focus (an epoch) must
// deliver every event of each run it touches from seq 1 (or from its cursor)
// in order, each run complete up to its terminal event before the next run
// begins: anything else is a duplicate or a gap. A refocus starts a new
// epoch; the events it replays that the tab had already seen are counted
// separately (reseen), never as duplicates.
type seqCheck struct {
	runs   map[string]*runSeen // this epoch
	last   string              // run delivered last in this epoch
	seen   map[string]uint64   // highest seq ever seen per run, across epochs
	cursor map[string]uint64   // this epoch's starting point per run (from a focus cursor)
	dups   uint64
	gaps   uint64
	reseen uint64
}

type runSeen struct {
	next uint64
	done bool
}

func newSeqCheck() *seqCheck {
	return &seqCheck{runs: map[string]*runSeen{}, seen: map[string]uint64{}}
}

// refocus starts a new epoch; cursorRun/cursorSeq is the focus cursor sent
// ("" when none).
func (s *seqCheck) refocus(cursorRun string, cursorSeq uint64) {
	clear(s.runs)
	s.last = ""
	s.cursor = nil
	if cursorRun != "" {
		s.cursor = map[string]uint64{cursorRun: cursorSeq}
	}
}

// covered is the number of events e stands for: one, or a compacted
// record's SeqFrom..Seq.
func (e *eventHead) covered() uint64 {
	if e.SeqFrom == 0 || e.SeqFrom > e.Seq {
		return 1
	}
	return e.Seq - e.SeqFrom + 1
}

// event checks one delivered event (or compacted record) of the focused
// session.
func (s *seqCheck) event(e *eventHead) {
	first := e.Seq + 1 - e.covered()
	if hi := s.seen[e.RunID]; first <= hi {
		s.reseen++
	}
	if hi := s.seen[e.RunID]; e.Seq > hi {
		s.seen[e.RunID] = e.Seq
	}
	r := s.runs[e.RunID]
	if r == nil {
		start := uint64(1)
		if c, ok := s.cursor[e.RunID]; ok {
			start = c + 1
		}
		r = &runSeen{next: start}
		s.runs[e.RunID] = r
		if prev := s.runs[s.last]; prev != nil && !prev.done {
			s.gaps++ // a new run began before the previous one's terminal event
		}
		s.last = e.RunID
	} else if e.RunID != s.last {
		s.dups++ // an earlier run of this epoch came back
		return
	}
	switch {
	case r.done || first < r.next:
		s.dups++
		return
	case first > r.next:
		s.gaps += first - r.next
	}
	r.next = e.Seq + 1
	r.done = e.Terminal
}

// decodeWhole decodes a message with encoding/json into a generic value
// and drops it: the cost of a client that reads every field (-full-decode).
func decodeWhole(line []byte) {
	var v any
	_ = json.Unmarshal(line, &v)
}
