package hermeswebui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runhub/runhub/hub/hermeswebui"
	"github.com/runhub/runhub/internal/webuiclient"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// realTurn is one turn as the real hermes-webui records it: the user
// message stamped with pending_started_at, the turn journal's rows
// (submitted just after, worker_started, assistant_started, completed),
// the run journal named by the stream id, and the assistant message
// stamped at the turn's end.
type realTurn struct {
	prompt, answer string
	at, took       float64 // the user message's time, the turn's length
}

// sevenTurns are seven turns of one session; the fourth lasts 1.1 s and
// the fifth is sent 0.5 s after it ended, within two seconds of the
// fourth run journal's first row.
var sevenTurns = []realTurn{
	{"List the failing tests.", "test_io and test_net.", 0, 8.2},
	{"Why does test_io fail?", "It times out after 5s.", 60, 12.5},
	{"Raise the limit to 30s.", "Done: raised to 30s.", 120, 9.0},
	{"ok", "Good.", 300, 1.1},
	{"Rerun the suite.", "All green.", 301.6, 20.0},
	{"Commit it.", "Committed as 4f2a1c.", 400, 5.5},
	{"Thanks!", "You're welcome.", 500, 0.9},
}

// writeRealSession writes a session of turns into dir in the shape the
// real WebUI writes: the sidecar (every documented field, user messages
// with float times, assistant ones with the per-turn stats), one run
// journal per turn, and the turn journal in two pid shards (WebUI was
// restarted after the third turn). Without turnJournal there is none (a
// WebUI older than the turn journal).
func writeRealSession(t *testing.T, dir, sid string, base float64, turns []realTurn, turnJournal bool) []string {
	t.Helper()
	var msgs []map[string]any
	var runs []webuiclient.Run
	var ids []string
	shards := map[string]*strings.Builder{}
	for n, tr := range turns {
		at, end := base+tr.at, base+tr.at+tr.took
		rid := webuiclient.RunID(sid, n+1)
		ids = append(ids, rid)
		msgs = append(msgs,
			map[string]any{"role": "user", "content": tr.prompt, "timestamp": at},
			map[string]any{"role": "assistant", "content": tr.answer, "timestamp": end, "_ts": end,
				"_turnDuration": tr.took, "_turnTps": 30.0, "_firstTokenMs": 400, "_usedModel": "gpt-5.1"})
		half := len(tr.answer) / 2
		sess := map[string]any{"session_id": sid, "messages": []any{}, "tool_calls": []any{}, "message_count": 2 * (n + 1)}
		runs = append(runs, webuiclient.Run{ID: rid, Rows: []webuiclient.Row{
			{Event: "context_status", Payload: map[string]any{"session_id": sid, "prefill": map[string]any{}}, At: at + 0.05},
			{Event: "token", Payload: map[string]any{"text": tr.answer[:half]}, At: at + 0.4},
			{Event: "token", Payload: map[string]any{"text": tr.answer[half:]}, At: at + 0.5},
			{Event: "metering", Payload: map[string]any{"tps": 30.0, "tps_available": true, "estimated": false, "high": 31, "low": 29, "active": true,
				"session_id": sid, "usage": map[string]any{"input_tokens": 900, "output_tokens": 12}}, At: at + 0.6},
			{Event: "done", Payload: map[string]any{"session": sess, "usage": map[string]any{"input_tokens": 900, "output_tokens": 12,
				"duration_seconds": tr.took}, "terminal_state": "completed"}, At: end - 0.05},
			{Event: "stream_end", Payload: map[string]any{"session_id": sid}, At: end},
		}})
		if !turnJournal {
			continue
		}
		shard := sid + "~1111.jsonl"
		if n >= 3 {
			shard = sid + "~2222.jsonl"
		}
		if shards[shard] == nil {
			shards[shard] = &strings.Builder{}
		}
		turnID := fmt.Sprintf("20260801T10%02d00Z-%012x", n, n+1)
		for _, row := range []map[string]any{
			{"version": 1, "event": "submitted", "session_id": sid, "turn_id": turnID, "stream_id": rid, "created_at": at + 0.002,
				"role": "user", "content": tr.prompt, "attachments": []any{}, "workspace": "/home/ann/proj", "model": "gpt-5.1", "model_provider": "openai"},
			{"version": 1, "event": "worker_started", "session_id": sid, "turn_id": turnID, "stream_id": rid, "created_at": at + 0.01},
			{"version": 1, "event": "assistant_started", "session_id": sid, "turn_id": turnID, "stream_id": rid, "created_at": at + 0.4,
				"assistant_message_index": 2*n + 1},
			{"version": 1, "event": "completed", "session_id": sid, "turn_id": turnID, "stream_id": rid, "created_at": end,
				"assistant_message_index": 2*n + 1, "terminal": true},
		} {
			b, _ := json.Marshal(row)
			shards[shard].Write(b)
			shards[shard].WriteByte('\n')
		}
	}
	last := base + turns[len(turns)-1].at + turns[len(turns)-1].took
	must(t, webuiclient.WriteSession(dir, webuiclient.Session{ID: sid, Messages: msgs, Runs: runs,
		Fields: map[string]any{"title": "Flaky tests", "created_at": base - 1, "updated_at": last}}))
	if turnJournal {
		tdir := filepath.Join(dir, "sessions", "_turn_journal")
		must(t, os.MkdirAll(tdir, 0o700))
		for name, b := range shards {
			must(t, os.WriteFile(filepath.Join(tdir, name), []byte(b.String()), 0o600))
		}
	}
	return ids
}

// Seven turns, one shorter than two seconds and followed within two
// seconds by the next, in a state directory as the real WebUI writes it:
// seven runs, each its journal's (the stream id), beginning with
// run.started carrying that turn's prompt, in the turns' order. With the
// turn journal the runs are matched by stream id; without it (an older
// WebUI) by time, which must not give the short turn's journal to the next
// turn either.
func TestImport_SevenTurnsSevenRuns(t *testing.T) {
	for _, withTurnJournal := range []bool{true, false} {
		t.Run(fmt.Sprintf("turn journal %v", withTurnJournal), func(t *testing.T) {
			dir, sid := t.TempDir(), "7a7a7a7a7a7a"
			ids := writeRealSession(t, dir, sid, 1786000000, sevenTurns, withTurnJournal)
			store := openStore(t)
			res := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"})
			if o := res.outcomes[sid]; o.Runs != len(sevenTurns) || o.Skip != "" {
				t.Fatalf("outcome %+v, want %d runs", o, len(sevenTurns))
			}
			ctx := context.Background()
			meta, err := store.Session(ctx, sid)
			must(t, err)
			if strings.Join(meta.Runs, ",") != strings.Join(ids, ",") {
				t.Fatalf("runs %v, want the journals' %v in order", meta.Runs, ids)
			}
			for n, rid := range meta.Runs {
				var evs []protocol.Envelope
				must(t, journal.ReadAll(ctx, store, rid, 0, func(e protocol.Envelope) error {
					evs = append(evs, e)
					return nil
				}))
				p, err := protocol.DecodePayload[protocol.RunStartedPayload](&evs[0])
				if evs[0].Type != protocol.EventRunStarted || err != nil || p.Message != sevenTurns[n].prompt {
					t.Fatalf("turn %d: begins %s %s, want run.started with %q", n+1, evs[0].Type, evs[0].Payload, sevenTurns[n].prompt)
				}
				text := ""
				for _, e := range evs {
					if e.Type == protocol.EventTokenDelta {
						tp, _ := protocol.DecodePayload[protocol.TokenDeltaPayload](&e)
						text += tp.Text
					}
				}
				if last := evs[len(evs)-1]; text != sevenTurns[n].answer || last.Type != protocol.EventDone {
					t.Fatalf("turn %d: answer %q ending %s, want %q and done", n+1, text, last.Type, sevenTurns[n].answer)
				}
			}
		})
	}
}

// The same prompt sent twice goes to the turn nearest its submitted row;
// a prompt the turn journal has with the workspace prefix WebUI sends the
// model still matches the bare text of the sidecar.
func TestImport_MatchSamePromptAndPrefix(t *testing.T) {
	dir, sid := t.TempDir(), "5a5e5a5e5a5e"
	turns := []realTurn{{"continue", "one", 0, 1}, {"continue", "two", 1.5, 1}, {"continue", "three", 3, 1}}
	ids := writeRealSession(t, dir, sid, 1786000000, turns, true)
	shard := filepath.Join(dir, "sessions", "_turn_journal", sid+"~1111.jsonl")
	b, err := os.ReadFile(shard)
	must(t, err)
	must(t, os.WriteFile(shard, []byte(strings.ReplaceAll(string(b), `"content":"continue"`, `"content":"[Workspace::v1: /home/ann/proj] continue"`)), 0o600))
	store := openStore(t)
	if o := importDir(t, dir, &hermeswebui.Writer{Store: store, Owner: "ann"}).outcomes[sid]; o.Runs != 3 {
		t.Fatalf("outcome %+v", o)
	}
	meta, err := store.Session(context.Background(), sid)
	must(t, err)
	if strings.Join(meta.Runs, ",") != strings.Join(ids, ",") {
		t.Fatalf("runs %v, want %v", meta.Runs, ids)
	}
	for _, rid := range meta.Runs {
		must(t, journal.ReadAll(context.Background(), store, rid, 0, func(e protocol.Envelope) error {
			if e.Type == protocol.EventRunStarted {
				if p, _ := protocol.DecodePayload[protocol.RunStartedPayload](&e); p.Message != "continue" {
					t.Errorf("run %s: run.started message %q, want the bare prompt", rid, p.Message)
				}
			}
			return nil
		}))
	}
}
