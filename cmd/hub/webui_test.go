package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/sim"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/internal/webuiclient"
	"github.com/runhub/runhub/journal/bolt"
)

// stateDir writes a WebUI state directory: the full conversation and a
// malformed session file.
func stateDir(t *testing.T) (string, webuiclient.Session) {
	t.Helper()
	dir := t.TempDir()
	conv := webuiclient.Conversation("a1b2c3d4e5f6", 1786000000)
	if err := webuiclient.WriteSession(dir, conv); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		s := webuiclient.Session{ID: "00000000000" + strconv.Itoa(i), Messages: []map[string]any{
			{"role": "user", "content": "q", "timestamp": 1786000000.0}, {"role": "assistant", "content": "a", "timestamp": 1786000001.0}}}
		if err := webuiclient.WriteSession(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions", "broken000000.json"), []byte(`{"session_id": "broken000000", "mess`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, conv
}

// hub import hermes-webui: the summary counts sessions, runs, events and
// the skipped file by path; a dry run writes nothing; a second import
// changes nothing; the progress bar draws when asked.
func TestImportCommand(t *testing.T) {
	dir, _ := stateDir(t)
	data := t.TempDir()
	run := func(args ...string) (int, string, string) {
		var out, errw bytes.Buffer
		code := runMain(context.Background(), append([]string{"import", "hermes-webui", dir, "-data", data, "-owner", "ann"}, args...), &out, &errw)
		return code, out.String(), errw.String()
	}
	code, out, errs := run("-dry-run")
	if code != 0 || !strings.Contains(out, "would import (dry run, nothing written): 4 (4 new") {
		t.Fatalf("dry run: %d\n%s%s", code, out, errs)
	}
	if s := openBolt(t, data); s != nil {
		if _, err := s.Session(context.Background(), "a1b2c3d4e5f6"); err == nil {
			t.Fatal("the dry run wrote")
		}
		s.Close()
	}
	code, out, errs = run()
	if code != 0 || !strings.Contains(out, "sessions imported: 4 (4 new, 0 already") || !strings.Contains(out, "runs: 8 written, 0 already imported") ||
		!strings.Contains(out, filepath.Join(dir, "sessions", "broken000000.json")+": ") || !strings.Contains(out, "skipped: 1") {
		t.Fatalf("import: %d\n%s%s", code, out, errs)
	}
	code, out, _ = run("-progress", "off")
	if code != 0 || !strings.Contains(out, "4 already imported and unchanged") || !strings.Contains(out, "runs: 0 written, 8 already imported") ||
		!strings.Contains(out, "events: 0") {
		t.Fatalf("second import:\n%s", out)
	}
	var out2, errw bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-data", data, "-progress", "on", "-owner", "ann"}, &out2, &errw); code != 0 {
		t.Fatalf("with a progress bar: %d %s", code, errw.String())
	}
	// The bar goes to stderr only through main; Import draws it on the writer it gets.
	var bar bytes.Buffer
	cfg, err := parseImportConfig([]string{"hermes-webui", dir, "-data", data, "-owner", "ann"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(context.Background(), cfg, &bytes.Buffer{}, &bar); err != nil || !strings.Contains(bar.String(), "] 5/5") {
		t.Fatalf("progress bar %q %v", bar.String(), err)
	}
	for _, bad := range [][]string{{"import"}, {"import", "other", dir}, {"import", "hermes-webui"}, {"import", "hermes-webui", dir, "-progress", "sometimes"}} {
		var o, e bytes.Buffer
		if code := runMain(context.Background(), bad, &o, &e); code == 0 {
			t.Fatalf("%v: exit 0", bad)
		}
	}
}

func openBolt(t *testing.T, data string) *bolt.Store {
	s, err := bolt.Open(filepath.Join(data, "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The import writes the Redis journal as well; a hub on it serves the
// imported run's rows over the runner API.
func TestImportCommand_Redis(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	dir, conv := stateDir(t)
	var out, errw bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-redis-url", rs.URL()}, &out, &errw); code != 0 {
		t.Fatalf("import: %d %s%s", code, out.String(), errw.String())
	}
	if !strings.Contains(out.String(), "runs: 8 written") {
		t.Fatalf("summary:\n%s", out.String())
	}
	p := startHub(t, t.TempDir(), "RUNHUB_REDIS_URL="+rs.URL(), "RUNHUB_RUNTIME=inprocess")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := webuiclient.New(p.URL()+"/compat/hermes-webui", "")
	run := conv.Runs[0]
	es, err := c.ObserveRun(ctx, run.ID, nil)
	if err != nil || len(es.Events) != len(run.Rows) {
		t.Fatalf("imported run over the runner API: %d events, %d rows, %v", len(es.Events), len(run.Rows), err)
	}
	for i, row := range run.Rows {
		if es.Events[i]["event"] != row.Event {
			t.Fatalf("row %d: %v, want %s", i+1, es.Events[i]["event"], row.Event)
		}
	}
	var out2 bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-redis-url", rs.URL()}, &out2, &errw); code != 0 ||
		!strings.Contains(out2.String(), "runs: 0 written, 8 already imported") {
		t.Fatalf("second import on Redis: %d\n%s", code, out2.String())
	}
}

// Slice 4a across a hub restart in runners mode: a long run started
// through the runner API executes in a runner; the hub restarts; a new
// WebUI client re-attaches from its cursor and sees the rest once (no gap,
// no repeat), cancel still reaches the run, and the terminal is the one
// the run had.
func TestWebUIRunnersHubRestart(t *testing.T) {
	rs := redistest.Start(t, redistest.Options{})
	env := []string{"RUNHUB_REDIS_URL=" + rs.URL(), "RUNHUB_LEASE_TTL=2s"}
	p := startHub(t, t.TempDir(), env...)
	startRunner(t, env...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := webuiclient.New(p.URL()+"/compat/hermes-webui", "")
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: "a1b2c3d4e5f6", Message: "long",
		Metadata: map[string]any{"sim": map[string]any{"tokens": 100000, "token_ms": 20, "tools": 0}}})
	if err != nil {
		t.Fatal(err)
	}
	var frames []webuiclient.Frame
	var cursor string
	rctx, stop := context.WithCancel(ctx)
	err = c.Relay(rctx, st.RunID, nil, func(f webuiclient.Frame) {
		frames = append(frames, f)
		if f.Event == "token" && len(frames) >= 10 {
			_, cursor, _ = strings.Cut(f.ID, ":")
			stop()
		}
	})
	if cursor == "" {
		t.Fatalf("no tokens before the restart: %v %v", err, frames)
	}
	addr := p.addr
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	p = startHubAt(t, addr, t.TempDir(), env...)
	restarted := webuiclient.New(p.URL()+"/compat/hermes-webui", "")
	var after []webuiclient.Frame
	rctx, stop = context.WithCancel(ctx)
	cancelled := false
	err = restarted.Relay(rctx, st.RunID, &cursor, func(f webuiclient.Frame) {
		after = append(after, f)
		if f.Event == "token" && len(after) == 20 && !cancelled {
			cancelled = true
			go func() {
				if res, err := restarted.CancelRun(ctx, st.RunID); err != nil || !res.Accepted {
					t.Errorf("cancel after the restart: %+v %v", res, err)
				}
			}()
		}
	})
	stop()
	if err != nil {
		t.Fatal(err)
	}
	// No repeat: seqs only grow. (They may skip: an event the WebUI's
	// dialect has no frame for, such as the run's status while the cancel
	// is under way, takes a seq between two tokens. No token is lost: the
	// text below is the simulator's, whole, up to the cancel.)
	last, _ := strconv.ParseUint(cursor, 10, 64)
	for i, f := range after {
		if f.ID != "" {
			_, s, _ := strings.Cut(f.ID, ":")
			seq, _ := strconv.ParseUint(s, 10, 64)
			if seq <= last {
				t.Fatalf("frame %d (%s): seq %d after %d", i, f.Event, seq, last)
			}
			last = seq
		}
	}
	all := append(frames, after...)
	var full strings.Builder
	for _, f := range all {
		if f.Event == "token" {
			full.WriteString(f.Data.(map[string]any)["text"].(string))
		}
	}
	if !strings.HasPrefix(sim.Text(100000), full.String()) || all[len(all)-1].Event != "cancel" {
		t.Fatalf("across the restart: %q… ends %s", protoPrefix(full.String()), all[len(all)-1].Event)
	}
	run, err := restarted.GetRun(ctx, st.RunID)
	if err != nil || run.TerminalState != "cancelled" {
		t.Fatalf("get_run: %+v %v", run, err)
	}
}

func protoPrefix(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}

// The imported context_messages are the history the OpenAI driver sends
// on the session's next turn, which WebUI starts through the runner API
// on a hub with the imported journal.
func TestWebUIImportedHistoryReachesTheModel(t *testing.T) {
	var mu sync.Mutex
	var got [][]map[string]string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []map[string]string `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = append(got, req.Messages)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Sure.\"}}]}\n\n")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer upstream.Close()
	profiles := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(profiles, []byte(`{"default": "local", "profiles": {"local": {"driver": "openai", "base_url": "`+upstream.URL+`", "model": "m"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, conv := stateDir(t)
	data := t.TempDir()
	var out, errw bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-data", data}, &out, &errw); code != 0 {
		t.Fatalf("import: %s%s", out.String(), errw.String())
	}
	p := startHub(t, data, "RUNHUB_PROFILES="+profiles)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := webuiclient.New(p.URL()+"/compat/hermes-webui", "")
	st, err := c.StartRun(ctx, webuiclient.StartRunRequest{SessionID: conv.ID, Message: "and now?", Profile: ptrTo("default"),
		Provider: ptrTo("openai"), Model: ptrTo("m")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Relay(ctx, st.RunID, nil, func(webuiclient.Frame) {}); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{}
	for _, m := range conv.Context {
		if s, ok := m["content"].(string); ok && s != "" && m["role"] != "tool" {
			want = append(want, map[string]string{"role": m["role"].(string), "content": s})
		}
	}
	want = append(want, map[string]string{"role": "user", "content": "and now?"})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("the model got %v\nwant %v", got, want)
	}
}

func ptrTo(s string) *string { return &s }
