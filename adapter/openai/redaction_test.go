package openai

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// A model that streams real-looking secrets — in its answer and its
// reasoning, cut into chunks of a few bytes as real models stream, and in
// tool-call arguments (which the driver does not map) — gets none of them
// into the journal file, the logs or the events a tab is sent; the text is
// otherwise kept: the whole answer redacted at once.
func TestRedaction_StreamedSecrets(t *testing.T) {
	text := drivertest.SecretText()
	want := journal.RedactString(text)
	for seed := range uint64(8) {
		chunks := drivertest.Chunks(text, 4, seed)
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			streamHeaders(w)
			send(w, roleChunk)
			for _, c := range chunks {
				send(w, reasoning(c))
			}
			for _, s := range drivertest.Secrets {
				args := jsonStr(`{"cmd":"` + s.Context + `"}`)
				send(w, `data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"sh","arguments":`+args+`}}]}}]}`+"\n")
			}
			for _, c := range chunks {
				send(w, content(c))
			}
			send(w, finishChunk, usageChunk, doneLine)
		})
		h := setup(t, f, nil)
		ev := h.Events(start(h, "", "show me the config"), 10*time.Second)
		drivertest.Terminal(t, ev, protocol.EventDone)
		drivertest.NoLeak(t, h, ev, true)
		for _, typ := range []protocol.EventType{protocol.EventTokenDelta, protocol.EventReasoningDelta} {
			if got := drivertest.StreamText(t, ev, typ); got != want {
				t.Fatalf("seed %d: %s text\n got %q\nwant %q", seed, typ, got, want)
			}
		}
	}
}

// An answer sent whole (no stream) holding the secrets is redacted too.
func TestRedaction_WholeAnswer(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"model":"m-up","choices":[{"index":0,"message":{"role":"assistant","content":`+jsonStr(drivertest.SecretText())+`},"finish_reason":"stop"}]}`)
	})
	h := setup(t, f, nil)
	ev := h.Events(start(h, "", "hi"), 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	drivertest.NoLeak(t, h, ev, true)
}

// Error answers carrying a secret — a refused key echoed in a 401, a 500's
// message, a plain-text 503, an error in the middle of the stream — end
// the run with an error whose message has the secret redacted, and the
// secret is nowhere.
func TestRedaction_ErrorBodies(t *testing.T) {
	for _, s := range drivertest.Secrets {
		msg := drivertest.Marker + " " + s.Context
		for _, c := range []struct {
			name string
			fail func(w http.ResponseWriter)
		}{
			{"401", func(w http.ResponseWriter) {
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error":{"message":`+jsonStr(msg)+`,"type":"invalid_request_error"}}`)
			}},
			{"500", func(w http.ResponseWriter) {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"message":`+jsonStr(msg)+`}`)
			}},
			{"503 text", func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, msg)
			}},
			{"in-stream", func(w http.ResponseWriter) {
				streamHeaders(w)
				send(w, content("partial "), `data: {"error":{"message":`+jsonStr(msg)+`}}`+"\n")
			}},
		} {
			t.Run(fmt.Sprintf("%s/%s", s.Name, c.name), func(t *testing.T) {
				f := newFake(t, func(w http.ResponseWriter, r *http.Request) { c.fail(w) })
				h := setup(t, f, nil)
				ev := h.Events(start(h, "", "hi"), 10*time.Second)
				p := drivertest.ErrorOf(t, drivertest.Terminal(t, ev, protocol.EventError))
				if p.Message == "" {
					t.Fatalf("error %+v", p)
				}
				drivertest.NoLeak(t, h, ev, true)
			})
		}
	}
}
