package hermeswebui_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/internal/webuiclient"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

const now = 1790000000.0

func openStore(t *testing.T) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fixture writes a state directory: the full conversation, a compression
// snapshot and its continuation, a cut-off session, and every kind of file
// an import must pass over or report.
func fixture(t *testing.T) (dir string, conv webuiclient.Session) {
	t.Helper()
	dir = t.TempDir()
	conv = webuiclient.Conversation("a1b2c3d4e5f6", 1786000000)
	// A fourth journal of conv whose last line is truncated (a crash
	// mid-write), and one with a seq gap: both reported, their turns come
	// from the transcript.
	conv.Runs = append(conv.Runs,
		webuiclient.Run{ID: "feedfacefeedfacefeedfacefeedface", Raw: `{"version":1,"event_id":"x:1","seq":1,"run_id":"feedfacefeedfacefeedfacefeedface","session_id":"a1b2c3d4e5f6","event":"token","type":"token","created_at":1786000400.5,"payload":{"text":"One"}}` + "\n" + `{"version":1,"seq":2,"ev`},
		webuiclient.Run{ID: "0badc0de0badc0de0badc0de0badc0de", Raw: webuiclient.JournalLines("a1b2c3d4e5f6", "0badc0de0badc0de0badc0de0badc0de",
			[]webuiclient.Row{{Event: "token", Payload: map[string]any{"text": "a"}, At: 1786000400.6}})[:0] +
			`{"version":1,"seq":1,"run_id":"0badc0de0badc0de0badc0de0badc0de","event":"token","payload":{"text":"a"},"created_at":1786000400.6}` + "\n" +
			`{"version":1,"seq":3,"run_id":"0badc0de0badc0de0badc0de0badc0de","event":"stream_end","payload":{},"created_at":1786000400.7}` + "\n"},
	)
	must(t, webuiclient.WriteSession(dir, conv))
	// A compression snapshot and its continuation.
	snap := webuiclient.Session{ID: "5a5a5a5a5a5a", Fields: map[string]any{"pre_compression_snapshot": true, "title": "old"},
		Messages: []map[string]any{{"role": "user", "content": "old turn", "timestamp": 1785000000.0}}}
	must(t, webuiclient.WriteSession(dir, snap))
	cont := webuiclient.Session{ID: "20260801_120000_abcd", Fields: map[string]any{"parent_session_id": "5a5a5a5a5a5a", "title": "continued"},
		Messages: []map[string]any{{"role": "user", "content": "continue", "timestamp": 1785000100.0}, {"role": "assistant", "content": "ok", "timestamp": 1785000101.0}}}
	must(t, webuiclient.WriteSession(dir, cont))
	// A session cut off mid-turn (deferred save: the prompt only pending),
	// with a run journal that never got a terminal row (lost worker).
	cut := webuiclient.Session{ID: "c0ffeec0ffee", Fields: map[string]any{"active_stream_id": "deadbeefdeadbeefdeadbeefdeadbeef",
		"pending_user_message": "are you there?", "pending_started_at": 1786100000.0},
		Messages: []map[string]any{{"role": "user", "content": "hello", "timestamp": 1786099000.0}, {"role": "assistant", "content": "hi", "timestamp": 1786099001.0}},
		Runs: []webuiclient.Run{{ID: "deadbeefdeadbeefdeadbeefdeadbeef", Rows: []webuiclient.Row{
			{Event: "token", Payload: map[string]any{"text": "I am"}, At: 1786100001.0}}}}}
	must(t, webuiclient.WriteSession(dir, cut))
	sd := filepath.Join(dir, "sessions")
	write := func(name, body string) { must(t, os.WriteFile(filepath.Join(sd, name), []byte(body), 0o600)) }
	write("bad0bad0bad0.json", `{"session_id": "bad0bad0bad0", "messages": [oops]}`)
	side, _ := os.ReadFile(filepath.Join(sd, "a1b2c3d4e5f6.json"))
	write("7777aaaa7777.json", strings.Replace(string(side[:len(side)/2]), "a1b2c3d4e5f6", "7777aaaa7777", 1)) // truncated
	write("8888bbbb8888.json", `{"session_id": "not-my-name", "messages": []}`)
	write("a1b2c3d4e5f6.json.bak", string(side))
	write("a1b2c3d4e5f6.tmp.123.456", string(side))
	write("_index.json", `[{"session_id":"a1b2c3d4e5f6"}]`)
	write("_deleted_webui_sessions.json", `{"version":1,"ids":[]}`)
	write("notes.txt", "hello")
	return dir, conv
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type result struct {
	outcomes map[string]hermeswebui.Outcome
	skips    []hermeswebui.Skip
}

// importDir is the importer's loop (cmd/hub's Import without its output).
func importDir(t *testing.T, dir string, w *hermeswebui.Writer) result {
	t.Helper()
	ctx := context.Background()
	files, skips, err := hermeswebui.Scan(dir)
	must(t, err)
	res := result{outcomes: map[string]hermeswebui.Outcome{}, skips: skips}
	for _, f := range files {
		s, err := hermeswebui.ReadSidecar(f, hermeswebui.Limits{})
		if err != nil {
			res.skips = append(res.skips, hermeswebui.Skip{Path: f.Path, Reason: err.Error()})
			continue
		}
		if s.PreCompressionSnapshot {
			res.skips = append(res.skips, hermeswebui.Skip{Path: f.Path, Reason: "snapshot"})
			continue
		}
		js, jskips := hermeswebui.ReadRunJournals(dir, s.SessionID, hermeswebui.Limits{})
		subs, pskips := hermeswebui.Submissions(dir, s.SessionID, hermeswebui.Limits{})
		res.skips = append(append(res.skips, jskips...), pskips...)
		o, err := w.Write(ctx, hermeswebui.Plan(hermeswebui.Input{Sidecar: s, Journals: js, Submitted: subs, Now: now}))
		must(t, err)
		res.skips = append(res.skips, o.RunSkips...)
		res.outcomes[s.SessionID] = o
	}
	return res
}

func skipped(res result, pathPart string) string {
	for _, s := range res.skips {
		if strings.HasSuffix(s.Path, pathPart) {
			return s.Reason
		}
	}
	return ""
}

// The importer writes every session with completed runs, reports every
// malformed file by path, links the compression snapshot to its
// continuation instead of importing it as a chat, and a second import
// changes nothing.
func TestImportStateDir(t *testing.T) {
	dir, _ := fixture(t)
	store := openStore(t)
	ctx := context.Background()
	res := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	for path, want := range map[string]string{
		"bad0bad0bad0.json":                      "invalid JSON",
		"7777aaaa7777.json":                      "JSON",
		"8888bbbb8888.json":                      "not the file's name",
		"a1b2c3d4e5f6.json.bak":                  "backup",
		"a1b2c3d4e5f6.tmp.123.456":               "temporary",
		"notes.txt":                              "not a session",
		"feedfacefeedfacefeedfacefeedface.jsonl": "truncated",
		"0badc0de0badc0de0badc0de0badc0de.jsonl": "not gapless",
		"5a5a5a5a5a5a.json":                      "snapshot",
	} {
		if r := skipped(res, path); !strings.Contains(r, want) {
			t.Errorf("%s: skipped %q, want a reason with %q", path, r, want)
		}
	}
	if r := skipped(res, "_index.json"); r != "" {
		t.Errorf("_index.json reported: %s", r)
	}
	conv := res.outcomes["a1b2c3d4e5f6"]
	// turns 1 and 5 from the transcript, runs 2-4 from their journals
	if !conv.Created || conv.Runs != 5 || conv.Skip != "" {
		t.Fatalf("conversation: %+v", conv)
	}
	if o := res.outcomes["20260801_120000_abcd"]; o.Runs != 1 {
		t.Fatalf("continuation: %+v", o)
	}
	if o := res.outcomes["c0ffeec0ffee"]; o.Runs != 2 { // hello; the pending prompt's run, whose journal lost its worker
		t.Fatalf("cut-off session: %+v", o)
	}
	meta, err := store.Session(ctx, "a1b2c3d4e5f6")
	must(t, err)
	if meta.Owner != "ann" || meta.Title != "Fix flaky CI" || meta.CreatedAt != 1786000000.12 || meta.ActiveRun != "" || len(meta.Runs) != 5 {
		t.Fatalf("session meta: %+v", meta)
	}
	for _, rid := range meta.Runs {
		rm, err := store.Run(ctx, rid)
		must(t, err)
		if !rm.Terminal {
			t.Fatalf("run %s is not completed", rid)
		}
	}
	// Second import: nothing changes.
	before := snapshot(t, store, []string{"a1b2c3d4e5f6", "20260801_120000_abcd", "c0ffeec0ffee"})
	again := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	for sid, o := range again.outcomes {
		if o.Runs != 0 || o.Events != 0 || o.Created || o.RunsUnchanged == 0 {
			t.Fatalf("second import of %s: %+v", sid, o)
		}
	}
	if after := snapshot(t, store, []string{"a1b2c3d4e5f6", "20260801_120000_abcd", "c0ffeec0ffee"}); !reflect.DeepEqual(before, after) {
		t.Fatal("the second import changed the journal")
	}
	// Another subject's import of the same directory touches nothing.
	other := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "bob"})
	if o := other.outcomes["a1b2c3d4e5f6"]; !strings.Contains(o.Skip, "another subject") || o.Runs != 0 {
		t.Fatalf("bob's import: %+v", o)
	}
}

// snapshot is every event of the sessions' runs.
func snapshot(t *testing.T, store *bolt.Store, sids []string) map[string][]protocol.Envelope {
	t.Helper()
	out := map[string][]protocol.Envelope{}
	for _, sid := range sids {
		meta, err := store.Session(context.Background(), sid)
		must(t, err)
		for _, rid := range meta.Runs {
			must(t, journal.ReadAll(context.Background(), store, rid, 0, func(e protocol.Envelope) error {
				out[rid] = append(out[rid], e)
				return nil
			}))
		}
	}
	return out
}

// A run journal replays row for row after its run.started (which carries
// the turn journal's prompt): row n is seq n+1, runhub's type for its
// name, and the dialect gives back exactly the row WebUI journaled (name,
// payload, created_at); the terminal row is the run's terminal event.
func TestImportJournalRoundTrip(t *testing.T) {
	dir, conv := fixture(t)
	store := openStore(t)
	importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	ctx := context.Background()
	types := map[string]protocol.EventType{"token": protocol.EventTokenDelta, "reasoning": protocol.EventReasoningDelta,
		"tool": protocol.EventToolStarted, "tool_complete": protocol.EventToolDone, "approval": protocol.EventApprovalReq,
		"clarify": protocol.EventClarifyReq, "metering": protocol.EventUsageUpdated, "title": protocol.EventTitleUpdated,
		"goal": protocol.EventGoalUpdated, "done": protocol.EventUsageFinal, "interim_assistant": protocol.EventProgress}
	for _, run := range conv.Runs[:3] {
		var got []protocol.Envelope
		must(t, journal.ReadAll(ctx, store, run.ID, 0, func(e protocol.Envelope) error {
			got = append(got, e)
			return nil
		}))
		if len(got) != len(run.Rows)+1 {
			t.Fatalf("run %s: %d events, %d rows and run.started", run.ID, len(got), len(run.Rows))
		}
		started, err := protocol.DecodePayload[protocol.RunStartedPayload](&got[0])
		if got[0].Type != protocol.EventRunStarted || err != nil || started.Message != run.Prompt || started.Source != hermeswebui.ImportSource {
			t.Fatalf("run %s begins %s %+v, want run.started with the prompt %q", run.ID, got[0].Type, started, run.Prompt)
		}
		m := &hermeswebui.Mapper{}
		if back := m.Map(&got[0]); len(back) != 0 {
			t.Fatalf("run.started maps to WebUI events %+v", back)
		}
		for i, row := range run.Rows {
			e := got[i+1]
			if e.Seq != uint64(i+2) || e.EventID != run.ID+":"+itoa(i+2) {
				t.Fatalf("run %s row %d: seq %d id %s", run.ID, i+1, e.Seq, e.EventID)
			}
			if want, ok := types[row.Event]; ok && e.Type != want {
				t.Fatalf("%s: type %s, want %s", row.Event, e.Type, want)
			}
			if last := i == len(run.Rows)-1; e.Terminal != last {
				t.Fatalf("%s (seq %d): terminal %v", row.Event, e.Seq, e.Terminal)
			}
			if !e.Terminal && e.CreatedAt != row.At {
				t.Fatalf("%s: created_at %v, want %v", row.Event, e.CreatedAt, row.At)
			}
			back := m.Map(&e)
			if len(back) != 1 || back[0].Event != row.Event || back[0].EventID != e.EventID || back[0].CreatedAt != row.At {
				t.Fatalf("row %d %s maps back to %+v", i+1, row.Event, back)
			}
			var a, b any
			json.Unmarshal(back[0].Payload, &a)
			raw, _ := json.Marshal(row.Payload)
			json.Unmarshal(raw, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("row %d %s: payload %s, want %s", i+1, row.Event, back[0].Payload, raw)
			}
		}
	}
	// The cancelled and the crashed run end as runhub says.
	for rid, want := range map[string]protocol.EventType{conv.Runs[1].ID: protocol.EventCancelled, conv.Runs[2].ID: protocol.EventError} {
		rm, err := store.Run(ctx, rid)
		if err != nil || rm.TerminalType != want {
			t.Fatalf("run %s: %+v %v, want %s", rid, rm, err, want)
		}
	}
	// The lost run gets the terminal WebUI would have made up.
	rm, err := store.Run(ctx, "deadbeefdeadbeefdeadbeefdeadbeef")
	if err != nil || rm.LastSeq != 3 || rm.TerminalType != protocol.EventError {
		t.Fatalf("lost run: %+v %v", rm, err)
	}
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + jsonNum(i)) }

func jsonNum(i int) string { b, _ := json.Marshal(i); return string(b) }

// Turns no journal covers are synthesized: the user's message as
// run.started, reasoning, tool calls and results, the answer as tokens,
// then done (or the error the transcript marks).
func TestImportTranscriptRuns(t *testing.T) {
	dir, _ := fixture(t)
	store := openStore(t)
	importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	ctx := context.Background()
	meta, err := store.Session(ctx, "a1b2c3d4e5f6")
	must(t, err)
	first := meta.Runs[0]
	if first != "a1b2c3d4e5f6.t1" {
		t.Fatalf("runs %v", meta.Runs)
	}
	var types []protocol.EventType
	var text string
	must(t, journal.ReadAll(ctx, store, first, 0, func(e protocol.Envelope) error {
		types = append(types, e.Type)
		switch e.Type {
		case protocol.EventRunStarted:
			p, _ := protocol.DecodePayload[protocol.RunStartedPayload](&e)
			if p.Message != "Why does test_io fail?" || p.Model != "gpt-5.1" || p.Source != hermeswebui.ImportSource || e.CreatedAt != 1786000001.25 {
				t.Fatalf("run.started %+v at %v", p, e.CreatedAt)
			}
		case protocol.EventToolStarted:
			p, _ := protocol.DecodePayload[protocol.ToolStartedPayload](&e)
			if p.ToolCallID != "call_9x" || p.Name != "read_file" || string(p.Args) != `{"path":"log.txt"}` {
				t.Fatalf("tool.started %+v", p)
			}
		case protocol.EventToolDone:
			p, _ := protocol.DecodePayload[protocol.ToolDonePayload](&e)
			if p.ToolCallID != "call_9x" || string(p.Result) != `"E: timeout after 5s"` {
				t.Fatalf("tool.done %+v", p)
			}
		case protocol.EventTokenDelta:
			p, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
			text += p.Text
		}
		return nil
	}))
	want := []protocol.EventType{protocol.EventRunStarted, protocol.EventReasoningDelta, protocol.EventReasoningDone,
		protocol.EventToolStarted, protocol.EventToolDone, protocol.EventTokenDelta, protocol.EventDone}
	if !reflect.DeepEqual(types, want) || text != "It times out; raise the limit." {
		t.Fatalf("turn 1: %v %q", types, text)
	}
	// Turn 5 ended with an error marker: an error event ends its run.
	last, err := store.Run(ctx, meta.Runs[4])
	if err != nil || last.TerminalType != protocol.EventError {
		t.Fatalf("turn 5: %+v %v", last, err)
	}
	// The cut-off session's pending prompt is the run its journal holds,
	// interrupted.
	cut, err := store.Session(ctx, "c0ffeec0ffee")
	must(t, err)
	pending := cut.Runs[len(cut.Runs)-1]
	rm, err := store.Run(ctx, pending)
	must(t, err)
	var req struct {
		Message string `json:"message"`
	}
	json.Unmarshal(rm.Request, &req)
	started := req.Message
	must(t, journal.ReadAll(ctx, store, pending, 0, func(e protocol.Envelope) error {
		if e.Terminal {
			p, _ := protocol.DecodePayload[protocol.ErrorPayload](&e)
			if e.Type != protocol.EventError || p.Code != protocol.ErrorInterrupted {
				t.Fatalf("pending turn ends %s %+v", e.Type, p)
			}
		}
		return nil
	}))
	if started != "are you there?" {
		t.Fatalf("pending prompt %q", started)
	}
}

// context_messages become the history drivers send on the next turn; a
// turn after the import continues it; a journaled run's prompt (from the
// turn journal) is the user's message where history is read from runs.
func TestImportHistory(t *testing.T) {
	dir, _ := fixture(t)
	store := openStore(t)
	importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	ctx := context.Background()
	turns, err := driver.SessionTranscript(ctx, store, store, "a1b2c3d4e5f6", "")
	must(t, err)
	want := []driver.Turn{
		{Role: "user", Content: "[CONTEXT COMPACTION] earlier: a flaky test_io, timeouts raised to 30s"},
		{Role: "assistant", Content: "Understood; continuing from the summary."},
		{Role: "user", Content: "One more question."},
		{Role: "assistant", Content: "Answer after the tool."},
	}
	if !reflect.DeepEqual(turns, want) {
		t.Fatalf("history %+v, want %+v", turns, want)
	}
	// The continuation has no context_messages: its runs are the history.
	turns, err = driver.SessionTranscript(ctx, store, store, "20260801_120000_abcd", "")
	must(t, err)
	if !reflect.DeepEqual(turns, []driver.Turn{{Role: "user", Content: "continue"}, {Role: "assistant", Content: "ok"}}) {
		t.Fatalf("continuation history %+v", turns)
	}
	// A session without context_messages whose turns have journals: the
	// prompt of each journaled run comes from its start request.
	d2 := t.TempDir()
	conv := webuiclient.Conversation("b2b2b2b2b2b2", 1786000000)
	conv.Context = nil
	must(t, webuiclient.WriteSession(d2, conv))
	importDir(t, d2, &hermeswebui.Writer{Store: store, Owner: "ann"})
	turns, err = driver.SessionTranscript(ctx, store, store, "b2b2b2b2b2b2", "")
	must(t, err)
	if len(turns) < 4 || turns[2] != (driver.Turn{Role: "user", Content: "Raise it to 30s and rerun."}) ||
		turns[3] != (driver.Turn{Role: "assistant", Content: "Done: raised to 30s."}) {
		t.Fatalf("history from runs %+v", turns)
	}
}

// Dry run writes nothing; an import an earlier one left half done is
// finished from where it stopped, with the same seqs.
func TestImportDryRunAndResume(t *testing.T) {
	dir, conv := fixture(t)
	store := openStore(t)
	ctx := context.Background()
	res := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann", DryRun: true})
	if o := res.outcomes["a1b2c3d4e5f6"]; o.Runs != 5 || !o.Created {
		t.Fatalf("dry run: %+v", o)
	}
	if _, err := store.Session(ctx, "a1b2c3d4e5f6"); err == nil {
		t.Fatal("the dry run wrote a session")
	}
	// An import that stopped after 3 events of run 2.
	files, _, _ := hermeswebui.Scan(dir)
	var s *hermeswebui.Sidecar
	for _, f := range files {
		if f.ID == "a1b2c3d4e5f6" {
			s, _ = hermeswebui.ReadSidecar(f, hermeswebui.Limits{})
		}
	}
	js, _ := hermeswebui.ReadRunJournals(dir, s.SessionID, hermeswebui.Limits{})
	ps := hermeswebui.Plan(hermeswebui.Input{Sidecar: s, Journals: js, Now: now})
	must(t, store.CreateSession(ctx, journal.SessionMeta{ID: ps.ID, Owner: "ann", CreatedAt: ps.CreatedAt}))
	for _, r := range ps.Runs {
		if r.ID != conv.Runs[0].ID {
			continue
		}
		must(t, store.BeginRun(ctx, journal.RunMeta{ID: r.ID, SessionID: ps.ID, Owner: "ann", CreatedAt: r.CreatedAt, Request: r.Request}))
		for i := 0; i < 3; i++ {
			if _, err := store.Append(ctx, r.Events[i], "hermes-webui-import:"+r.ID+":"+itoa(i+1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	res = importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	if o := res.outcomes["a1b2c3d4e5f6"]; o.Skip != "" || o.Runs != 5 {
		// run 2 was begun first, so the other runs were refused while
		// it was active: the resumed import finishes it first.
		t.Fatalf("resumed import: %+v", o)
	}
	rm, err := store.Run(ctx, conv.Runs[0].ID)
	if err != nil || !rm.Terminal || rm.LastSeq != uint64(len(conv.Runs[0].Rows)+1) {
		t.Fatalf("resumed run: %+v %v", rm, err)
	}
}

// Files over the limits are reported, not loaded; a large session under
// them imports whole.
func TestImportLimits(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("lorem ipsum ", 40000) // ~480 KB per message
	var msgs []map[string]any
	for i := 0; i < 12; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": "q" + itoa(i), "timestamp": 1786000000.0 + float64(i*10)},
			map[string]any{"role": "assistant", "content": big, "timestamp": 1786000001.0 + float64(i*10)})
	}
	must(t, webuiclient.WriteSession(dir, webuiclient.Session{ID: "b16b16b16b16", Messages: msgs}))
	files, _, err := hermeswebui.Scan(dir)
	must(t, err)
	if _, err := hermeswebui.ReadSidecar(files[0], hermeswebui.Limits{SidecarBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a file over the limit: %v", err)
	}
	store := openStore(t)
	res := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	if o := res.outcomes["b16b16b16b16"]; o.Runs != 12 {
		t.Fatalf("large session: %+v", o)
	}
	turns, err := driver.SessionTranscript(context.Background(), store, store, "b16b16b16b16", "")
	must(t, err)
	if len(turns) != 24 || turns[1].Content != big {
		t.Fatalf("large session's history: %d turns", len(turns))
	}
}

// A prompt only pending when WebUI stopped (deferred save), with no run
// journal, is its own turn, ended as interrupted.
func TestImportPendingPrompt(t *testing.T) {
	dir := t.TempDir()
	must(t, webuiclient.WriteSession(dir, webuiclient.Session{ID: "d0d0d0d0d0d0", Fields: map[string]any{
		"active_stream_id": "abababababababababababababababab", "pending_user_message": "are you there?", "pending_started_at": 1786100000.0},
		Messages: []map[string]any{{"role": "user", "content": "hello", "timestamp": 1786099000.0}, {"role": "assistant", "content": "hi", "timestamp": 1786099001.0}}}))
	store := openStore(t)
	res := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
	if o := res.outcomes["d0d0d0d0d0d0"]; o.Runs != 2 {
		t.Fatalf("outcome %+v", o)
	}
	ctx := context.Background()
	meta, err := store.Session(ctx, "d0d0d0d0d0d0")
	must(t, err)
	var started string
	var end protocol.Envelope
	must(t, journal.ReadAll(ctx, store, meta.Runs[1], 0, func(e protocol.Envelope) error {
		if e.Type == protocol.EventRunStarted {
			p, _ := protocol.DecodePayload[protocol.RunStartedPayload](&e)
			started = p.Message
		}
		end = e
		return nil
	}))
	p, _ := protocol.DecodePayload[protocol.ErrorPayload](&end)
	if started != "are you there?" || end.Type != protocol.EventError || p.Code != protocol.ErrorInterrupted || end.CreatedAt != now {
		t.Fatalf("pending turn: %q ends %s %+v at %v", started, end.Type, p, end.CreatedAt)
	}
}
