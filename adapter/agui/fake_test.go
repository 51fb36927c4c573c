package agui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/protocol"
)

// fakeAgent is an AG-UI server as the official integrations serve one
// (an AbstractAgent's events through @ag-ui/encoder over node:http, or
// the Python SDK's EventEncoder): POST with a RunAgentInput, answered 200
// text/event-stream, each event one "data: <json>\n\n" frame, RUN_STARTED
// first with the request's threadId and runId, RUN_FINISHED or RUN_ERROR
// last, then the body ends. An interrupted run ends with RUN_FINISHED
// outcome interrupt, and the continuing run is the next POST, whose
// resume answers the interrupts. turn scripts each POST.
type fakeAgent struct {
	srv  *httptest.Server
	turn func(w *agentStream, in *input)

	mu      sync.Mutex
	inputs  []*input
	headers []http.Header
	aborted chan struct{} // closed when a request ends before its handler
}

// input is a RunAgentInput as the fake reads it.
type input struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ProtocolVersion string            `json:"protocolVersion"`
	State           json.RawMessage   `json:"state"`
	Messages        []json.RawMessage `json:"messages"`
	Tools           json.RawMessage   `json:"tools"`
	Context         json.RawMessage   `json:"context"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps"`
	Resume          []struct {
		InterruptID string          `json:"interruptId"`
		Status      string          `json:"status"`
		Payload     json.RawMessage `json:"payload"`
	} `json:"resume"`
	raw []byte
}

func newFakeAgent(t *testing.T, turn func(w *agentStream, in *input)) *fakeAgent {
	f := &fakeAgent{turn: turn, aborted: make(chan struct{})}
	var once sync.Once
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		in := &input{raw: body}
		if err := json.Unmarshal(body, in); err != nil || in.ThreadID == "" || in.RunID == "" || in.Messages == nil {
			// What the integrations answer a body RunAgentInputSchema refuses.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"error":"Invalid input"}`)
			return
		}
		f.mu.Lock()
		f.inputs = append(f.inputs, in)
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		f.turn(&agentStream{w: w, in: in, ctx: r.Context()}, in)
		if r.Context().Err() != nil {
			once.Do(func() { close(f.aborted) })
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) requests() []*input {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*input(nil), f.inputs...)
}

// agentStream writes one AG-UI run's answer.
type agentStream struct {
	ctx     context.Context // the request's
	w       http.ResponseWriter
	in      *input
	started bool
}

// open writes the stream's headers (once).
func (s *agentStream) open() {
	if s.started {
		return
	}
	s.started = true
	s.w.Header().Set("Content-Type", "text/event-stream")
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
}

// send writes events, each given as a JSON object, as the encoder does.
func (s *agentStream) send(events ...string) {
	s.open()
	for _, e := range events {
		io.WriteString(s.w, "data: "+e+"\n\n")
	}
	s.w.(http.Flusher).Flush()
}

// raw writes bytes as they are.
func (s *agentStream) raw(b string) {
	s.open()
	io.WriteString(s.w, b)
	s.w.(http.Flusher).Flush()
}

// started and finished are the run's first and last events for its
// request.
func (s *agentStream) runStarted() {
	s.send(`{"type":"RUN_STARTED","threadId":"` + s.in.ThreadID + `","runId":"` + s.in.RunID + `"}`)
}

func (s *agentStream) finished(outcome string) {
	o := ""
	if outcome != "" {
		o = `,"outcome":` + outcome
	}
	s.send(`{"type":"RUN_FINISHED","threadId":"` + s.in.ThreadID + `","runId":"` + s.in.RunID + `"` + o + `}`)
}

// text sends a whole assistant message.
func (s *agentStream) text(id string, deltas ...string) {
	s.send(`{"type":"TEXT_MESSAGE_START","messageId":"` + id + `","role":"assistant"}`)
	for _, d := range deltas {
		b, _ := json.Marshal(d)
		s.send(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"` + id + `","delta":` + string(b) + `}`)
	}
	s.send(`{"type":"TEXT_MESSAGE_END","messageId":"` + id + `"}`)
}

// toolCall sends a tool call's start, arguments and end.
func (s *agentStream) toolCall(id, name, args, parent string) {
	p := ""
	if parent != "" {
		p = `,"parentMessageId":"` + parent + `"`
	}
	b, _ := json.Marshal(args)
	s.send(`{"type":"TOOL_CALL_START","toolCallId":"`+id+`","toolCallName":"`+name+`"`+p+`}`,
		`{"type":"TOOL_CALL_ARGS","toolCallId":"`+id+`","delta":`+string(b)+`}`,
		`{"type":"TOOL_CALL_END","toolCallId":"`+id+`"}`)
}

// harness runs the driver for f's agent under profile "ag".
func harness(t *testing.T, f *fakeAgent, cfg Config) *drivertest.Harness {
	t.Helper()
	cfg.URL = f.srv.URL + "/agent"
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	log, logs := drivertest.Logger()
	cfg.Logger = log
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drivertest.New(t, drivertest.Config{Log: log, Logs: logs,
		Profiles: map[string]driver.Profile{"ag": {Driver: d, Kind: Kind}}})
}

// start starts a run on profile "ag" and returns its id.
func start(h *drivertest.Harness, sid, msg string) protocol.RunStartResult {
	return h.Start(protocol.StartRunRequest{SessionID: sid, Message: msg, Profile: "ag"})
}

// text is the run's streamed text.
func text(events []protocol.Envelope) string {
	var b strings.Builder
	for _, e := range events {
		if e.Type == protocol.EventTokenDelta {
			p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func eventTypes(events []protocol.Envelope) []protocol.EventType {
	out := make([]protocol.EventType, 0, len(events))
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

func terminals(events []protocol.Envelope) int {
	n := 0
	for _, e := range events {
		if e.Terminal {
			n++
		}
	}
	return n
}

func last(events []protocol.Envelope) protocol.Envelope { return events[len(events)-1] }

func errorOf(t *testing.T, e protocol.Envelope) protocol.ErrorPayload {
	t.Helper()
	if e.Type != protocol.EventError {
		t.Fatalf("last event %s %s, want error", e.Type, e.Payload)
	}
	p, err := protocol.DecodePayload[protocol.ErrorPayload](&e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
