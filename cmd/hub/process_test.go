package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// The test binary doubles as the hub binary: with RUNHUB_TEST_AS_HUB=1 it
// runs main, so process tests need no separate build.
func TestMain(m *testing.M) {
	if os.Getenv("RUNHUB_TEST_AS_HUB") == "1" {
		envIgnored = testOnlyEnv
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testOnlyEnv tells the RUNHUB_ variables only the tests read (their hub
// children inherit them): no warning names them.
func testOnlyEnv(name string) bool {
	switch name {
	case "RUNHUB_CHROMIUM", "RUNHUB_SCREENSHOTS_DIR":
		return true
	}
	return strings.HasPrefix(name, "RUNHUB_TEST_") || strings.HasPrefix(name, "RUNHUB_MEASURE_")
}

// hubProcess is a hub running as a child process.
type hubProcess struct {
	t testing.TB
	*child
	addr string
	data string
	out  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startHub starts `hub serve` on a fresh port with the embedded journal in
// data and waits until /healthz answers.
func startHub(t testing.TB, data string, env ...string) *hubProcess {
	t.Helper()
	addr := freeAddr(t)
	return startHubOn(t, addr, addr, data, env...)
}

// startHubAt is startHub on a given address (a restart on the same one).
func startHubAt(t testing.TB, addr, data string, env ...string) *hubProcess {
	t.Helper()
	return startHubOn(t, addr, addr, data, env...)
}

// startHubOn starts `hub serve` listening on listenAddr (RUNHUB_ADDR) and
// waits until /healthz answers on addr.
func startHubOn(t testing.TB, listenAddr, addr, data string, env ...string) *hubProcess {
	t.Helper()
	p := &hubProcess{t: t, addr: addr, data: data, out: &syncBuffer{}}
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = append(os.Environ(), "RUNHUB_TEST_AS_HUB=1", "RUNHUB_ADDR="+listenAddr, "RUNHUB_DATA="+data)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	var err error
	if p.child, err = startChild(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(p.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("hub did not become healthy; output:\n%s", p.out.String())
	return nil
}

func (p *hubProcess) URL() string { return "http://" + p.addr }

// stop sends SIGTERM and waits for a clean exit: an error is the exit's
// (a non-zero status) or that none came within 20 s.
func (p *hubProcess) stop() error { return p.term(20 * time.Second) }

// call does one JSON HTTP request and decodes the answer into out.
func call(t testing.TB, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func allEvents(t testing.TB, base, runID string) []protocol.Envelope {
	t.Helper()
	var out []protocol.Envelope
	after := uint64(0)
	for {
		var page protocol.EventPage
		if code := call(t, "GET", fmt.Sprintf("%s/v1/runs/%s/events?after_seq=%d&limit=1000", base, runID, after), nil, &page); code != 200 {
			t.Fatalf("events: %d", code)
		}
		out = append(out, page.Events...)
		if len(page.Events) < 1000 {
			return out
		}
		after = page.Events[len(page.Events)-1].Seq
	}
}

// SIGKILL the hub mid-run and start it again: the run is interrupted with
// exactly one terminal event carrying the last journaled seq, also after a
// second restart.
func TestProcess_KillMidRunInterruptsOnce(t *testing.T) {
	data := t.TempDir()
	p := startHub(t, data)
	var sess protocol.CreateSessionResult
	if code := call(t, "POST", p.URL()+"/v1/sessions", map[string]string{"title": "kill me"}, &sess); code != 201 {
		t.Fatalf("create session: %d", code)
	}
	var run protocol.RunStartResult
	body := map[string]any{"message": "long", "metadata": map[string]any{"sim": map[string]any{"tokens": 100000, "token_ms": 5}}}
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", body, &run); code != 202 {
		t.Fatalf("start: %d", code)
	}
	// Let some tokens land in the journal.
	deadline := time.Now().Add(10 * time.Second)
	for len(allEvents(t, p.URL(), run.RunID)) < 20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()

	for restart := 1; restart <= 2; restart++ {
		p = startHub(t, data)
		var st protocol.RunStatus
		if code := call(t, "GET", p.URL()+"/v1/runs/"+run.RunID, nil, &st); code != 200 {
			t.Fatalf("run status: %d", code)
		}
		if st.Status != protocol.StatusInterrupted || !st.Terminal {
			t.Fatalf("restart %d: run status %+v, want interrupted", restart, st)
		}
		events := allEvents(t, p.URL(), run.RunID)
		terminals := 0
		for i, e := range events {
			if e.Seq != uint64(i+1) {
				t.Fatalf("gap: event %d has seq %d", i, e.Seq)
			}
			if e.Terminal {
				terminals++
			}
		}
		if terminals != 1 {
			t.Fatalf("restart %d: %d terminal events", restart, terminals)
		}
		last := events[len(events)-1]
		ep, _ := protocol.DecodePayload[protocol.ErrorPayload](&last)
		if last.Type != protocol.EventError || ep.Code != protocol.ErrorInterrupted || ep.LastSeq != last.Seq-1 {
			t.Fatalf("terminal event %+v payload %+v", last, ep)
		}
		var ss protocol.SessionStatus
		call(t, "GET", p.URL()+"/v1/sessions/"+sess.SessionID, nil, &ss)
		if ss.Status != protocol.StatusInterrupted || !strings.Contains(ss.Progress, "interrupted") {
			t.Fatalf("session status %+v", ss)
		}
		if err := p.stop(); err != nil {
			t.Fatalf("stop: %v\n%s", err, p.out.String())
		}
	}
}

// embeddedJournalBytes returns every byte the embedded journal in data
// keeps: its file and the segments of its event log.
func embeddedJournalBytes(t *testing.T, data string) []byte {
	t.Helper()
	files, err := bolt.Files(filepath.Join(data, "journal.db"))
	if err != nil || len(files) < 2 {
		t.Fatalf("no journal with an event log in %s: %v", data, err)
	}
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}
