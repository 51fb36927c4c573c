package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/protocol"
)

func streamDo(t *testing.T, method, url string, hdr map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// `hub serve` speaks Durable Streams at /v1/stream/*: a stream written
// through it survives a restart, a producer's retry after it is a
// duplicate, and a run reads as a closed JSON stream of its events.
func TestProcess_DurableStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts hubs")
	}
	data := t.TempDir()
	p := startHub(t, data)
	base := p.URL() + "/v1/stream/"
	text := map[string]string{"Content-Type": "text/plain"}
	if code, _, body := streamDo(t, "PUT", base+"notes", text, "first "); code != 201 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	prod := map[string]string{"Content-Type": "text/plain", "Producer-Id": "w", "Producer-Epoch": "0", "Producer-Seq": "0"}
	if code, _, body := streamDo(t, "POST", base+"notes", prod, "second"); code != 200 {
		t.Fatalf("POST: %d %s", code, body)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	p = startHubAt(t, p.addr, data)
	if code, _, _ := streamDo(t, "POST", base+"notes", prod, "second"); code != 204 {
		t.Fatalf("the producer's retry after the restart: %d, want 204 (a duplicate)", code)
	}
	code, hdr, body := streamDo(t, "GET", base+"notes?offset=-1", nil, "")
	if code != 200 || body != "first second" || hdr.Get("Stream-Up-To-Date") != "true" {
		t.Fatalf("GET after the restart: %d %q %v", code, body, hdr)
	}

	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "streams"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs",
		map[string]any{"message": "hi", "metadata": map[string]any{"sim": map[string]any{"tokens": 3, "token_ms": 1, "tools": 0}}}, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	var events []protocol.Envelope
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if events = allEvents(t, p.URL(), run.RunID); len(events) > 0 && events[len(events)-1].Terminal {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, hdr, body = streamDo(t, "GET", base+"runs/"+run.RunID+"?offset=-1", nil, "")
	var got []protocol.Envelope
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got) != len(events) || len(got) == 0 {
		t.Fatalf("the run's stream: %d %s; want its %d events", code, body, len(events))
	}
	for i := range got {
		if got[i].Seq != events[i].Seq || got[i].Type != events[i].Type {
			t.Fatalf("event %d: %d %s, want %d %s", i, got[i].Seq, got[i].Type, events[i].Seq, events[i].Type)
		}
	}
	if hdr.Get("Stream-Closed") != "true" {
		t.Fatalf("a finished run's stream is not closed: %v", hdr)
	}
	if code, _, _ := streamDo(t, "POST", base+"runs/"+run.RunID, map[string]string{"Content-Type": "application/json"}, "{}"); code != 405 {
		t.Fatalf("POST to a run's stream: %d, want 405", code)
	}
}
