package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/protocol"
)

// aguiAgent is an AG-UI agent that streams one word every 20 ms until
// release is closed, then finishes: served counts the words sent.
func aguiAgent(t *testing.T, release <-chan struct{}, served *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ ThreadID, RunID string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(e string) bool {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", e); err != nil {
				return false
			}
			w.(http.Flusher).Flush()
			return true
		}
		send(fmt.Sprintf(`{"type":"RUN_STARTED","threadId":%q,"runId":%q}`, in.ThreadID, in.RunID))
		send(`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`)
		for i := 0; i < 5000; i++ {
			select {
			case <-release:
				send(`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`)
				send(fmt.Sprintf(`{"type":"RUN_FINISHED","threadId":%q,"runId":%q,"outcome":{"type":"success"}}`, in.ThreadID, in.RunID))
				return
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			if !send(fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"w%d "}`, i)) {
				return
			}
			served.Add(1)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An agui profile in runners mode: the runner holds the agent's stream,
// so the run goes on while the hub restarts, and ends done once, with the
// agent's whole text and no gap in its seqs.
func TestRunners_AGUISurvivesHubRestart(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	release := make(chan struct{})
	var served atomic.Int64
	agent := aguiAgent(t, release, &served)
	file := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(file, []byte(`{"profiles": {"ag": {"driver": "agui", "url": "`+agent.URL+`/agent"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s", "RUNHUB_PROFILES=" + file}
	p := startHub(t, t.TempDir(), env...)
	startRunner(t, env...)

	var sess protocol.SessionStatus
	call(t, "POST", p.URL()+"/v1/sessions", map[string]any{}, &sess)
	var res protocol.RunStartResult
	if code := call(t, "POST", p.URL()+"/v1/sessions/"+sess.SessionID+"/runs", map[string]any{"message": "count", "profile": "ag"}, &res); code != 200 && code != 201 && code != 202 {
		t.Fatalf("start: %d %+v", code, res)
	}
	waitFor(t, 20*time.Second, "words before the restart", func() bool { return served.Load() >= 10 })

	addr := p.addr
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	before := served.Load()
	waitFor(t, 20*time.Second, "words while the hub is down", func() bool { return served.Load() >= before+10 })
	p = startHubAt(t, addr, t.TempDir(), env...)
	if st := runStatus(t, p, res.RunID); st.Terminal {
		t.Fatalf("after the restart the run is %+v", st)
	}
	close(release)
	var ev []protocol.Envelope
	waitFor(t, 30*time.Second, "the run's end", func() bool {
		ev = allEvents(t, p.URL(), res.RunID)
		return len(ev) > 0 && ev[len(ev)-1].Terminal
	})
	n := int(served.Load())
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "w%d ", i)
	}
	if got := tokenText(ev); got != want.String() {
		t.Fatalf("text %q…, want the %d words the agent sent", protoPrefix(got), n)
	}
	terminals := 0
	for i, e := range ev {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if e.Terminal {
			terminals++
		}
	}
	if terminals != 1 || ev[len(ev)-1].Type != protocol.EventDone {
		t.Fatalf("%d terminals, last %s", terminals, ev[len(ev)-1].Type)
	}
}
