package main

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The write modes.
const (
	writeRaw = "raw"
	writeLib = "lib"
)

// floor is the whole server state.
type floor struct {
	write   string
	hubID   string
	journal *committer    // nil: no journal
	done    chan struct{} // closed by stop: runs end
	runWG   sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session
	runs     map[string]*run
	all      []*tab // watching all sessions; copy-on-write
}

// newFloor is a floor writing frames the write way; with a journal
// directory, it journals every event there before writing it (its
// committer runs until stop).
func newFloor(write, journal string) (*floor, error) {
	f := &floor{write: write, hubID: newID("h_"), done: make(chan struct{}),
		sessions: map[string]*session{}, runs: map[string]*run{}}
	if journal != "" {
		file, err := openJournal(journal)
		if err != nil {
			return nil, err
		}
		f.journal = newCommitter(file)
	}
	return f, nil
}

// stop ends every run's goroutine and waits for them, then stops the
// journal's committer (the runs were its only submitters) and closes its
// file.
func (f *floor) stop() error {
	f.mu.Lock()
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	f.mu.Unlock()
	f.runWG.Wait()
	if f.journal != nil {
		return f.journal.close()
	}
	return nil
}

// newID is prefix + 32 hex digits, the length of the hub's ids.
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// session is one session: its focusing sockets and watchers, and its run.
type session struct {
	id string

	mu       sync.Mutex
	focused  []*tab // copy-on-write: a run reads it once per event
	watchers []*tab // copy-on-write
	current  *run
}

// run is one run: its producer goroutine's progress.
type run struct {
	id         string
	s          *session
	tokens     int
	pause      time.Duration
	started    time.Time
	cancel     chan struct{}
	cancelOnce sync.Once
	committed  chan error // the journal's answers to the run's goroutine (room for one)

	mu    sync.Mutex
	seq   uint64
	state string // terminal state, "" while running
}

func (r *run) progress() (uint64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq, r.state
}

func (f *floor) newSession() *session {
	s := &session{id: newID("s_")}
	f.mu.Lock()
	f.sessions[s.id] = s
	f.mu.Unlock()
	return s
}

func (f *floor) session(id string) *session {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[id]
}

func (f *floor) run(id string) *run {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[id]
}

// start begins a run on session sid; the answer is an HTTP status for
// refusals (0 when started).
func (f *floor) start(sid string, tokens int, pause time.Duration) (*run, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[sid]
	if s == nil {
		return nil, http.StatusNotFound
	}
	select {
	case <-f.done:
		return nil, http.StatusServiceUnavailable
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		if _, state := s.current.progress(); state == "" {
			return nil, http.StatusConflict
		}
	}
	r := &run{id: newID("r_"), s: s, tokens: tokens, pause: pause, started: time.Now(), cancel: make(chan struct{}),
		committed: make(chan error, 1)}
	s.current = r
	f.runs[r.id] = r
	f.runWG.Add(1)
	go f.produce(r)
	return r, 0
}

// produce emits the run's token.delta events, one every pause, then its
// terminal event (done, or cancelled when cancelled) and status.
func (f *floor) produce(r *run) {
	defer f.runWG.Done()
	var tick <-chan time.Time
	if r.pause > 0 {
		t := time.NewTicker(r.pause)
		defer t.Stop()
		tick = t.C
	}
	buf, pl := make([]byte, 0, 512), make([]byte, 0, 64)
	for i := range r.tokens {
		if tick != nil {
			select {
			case <-tick:
			case <-r.cancel:
				f.finish(r, buf, "cancelled")
				return
			case <-f.done:
				return
			}
		}
		pl = append(pl[:0], `{"message_id":"m1","text":"w`...)
		pl = strconv.AppendInt(pl, int64(i), 10)
		pl = append(pl, ` "}`...)
		buf = f.emit(r, buf, "token.delta", false, pl)
	}
	f.finish(r, buf, "completed")
}

// finish emits the terminal event, marks the run ended and tells the
// session's watchers.
func (f *floor) finish(r *run, buf []byte, state string) {
	typ, payload := "done", `{"message_id":"m1","text":""}`
	if state == "cancelled" {
		typ, payload = "cancelled", `{"reason":"cancelled"}`
	}
	f.emit(r, buf, typ, true, []byte(payload))
	r.mu.Lock()
	r.state = state
	seq := r.seq
	r.mu.Unlock()
	st := newMessage(appendStatus(make([]byte, messageHead, 512), r, seq, state))
	r.s.mu.Lock()
	watchers := r.s.watchers
	r.s.mu.Unlock()
	f.mu.Lock()
	all := f.all
	f.mu.Unlock()
	for _, t := range slices.Concat(watchers, all) {
		t.send(st)
	}
}

// emit encodes the run's next event once and writes it to every socket
// focusing the session. With a journal, the event is journaled first (the
// run waits for its batch's fdatasync), and not sent if that fails. buf is
// reused across events (each frame is journaled and written before the
// next is encoded).
func (f *floor) emit(r *run, buf []byte, typ string, terminal bool, payload []byte) []byte {
	r.mu.Lock()
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	buf = appendEvent(buf[:messageHead], r, seq, typ, time.Now(), terminal, payload)
	m := newMessage(buf)
	if f.journal != nil && f.journal.submit(m.payload(), r.committed) != nil {
		return buf // told by the committer; the run goes on
	}
	r.s.mu.Lock()
	focused := r.s.focused
	r.s.mu.Unlock()
	for _, t := range focused {
		t.send(m)
	}
	return buf
}

// appendEvent appends an event message as the hub encodes it (the
// envelope's fields in protocol.Envelope's order).
func appendEvent(b []byte, r *run, seq uint64, typ string, at time.Time, terminal bool, payload []byte) []byte {
	b = append(b, `{"type":"event","event":{"event_id":"`...)
	b = append(b, r.id...)
	b = append(b, ':')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"run_id":"`...)
	b = append(b, r.id...)
	b = append(b, `","session_id":"`...)
	b = append(b, r.s.id...)
	b = append(b, `","type":"`...)
	b = append(b, typ...)
	b = append(b, `","created_at":`...)
	b = strconv.AppendFloat(b, timestamp(at), 'f', -1, 64)
	b = append(b, `,"terminal":`...)
	b = strconv.AppendBool(b, terminal)
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	return append(b, "}}"...)
}

// appendStatus appends the terminal status of a run's session.
func appendStatus(b []byte, r *run, seq uint64, state string) []byte {
	b = append(b, `{"type":"status","session":{"session_id":"`...)
	b = append(b, r.s.id...)
	b = append(b, `","title":"","run_id":"`...)
	b = append(b, r.id...)
	b = append(b, `","status":"`...)
	b = append(b, state...)
	b = append(b, `","last_seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"last_event_id":"`...)
	b = append(b, eventID(r.id, seq)...)
	b = append(b, `","terminal":true,"terminal_state":"`...)
	b = append(b, state...)
	b = append(b, `","active_controls":[],"updated_at":`...)
	b = strconv.AppendFloat(b, timestamp(time.Now()), 'f', -1, 64)
	return append(b, "}}"...)
}
