package webuiclient

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// State directories as hermes-webui writes them (its api/models.py,
// run_journal.py and turn_journal.py, as docs/hermes-webui.md describes
// them), for importer tests: every documented sidecar field, messages of
// every documented shape, run journals with every event name, turn
// journals, and the files an importer must pass over.

// Row is a run journal row to write.
type Row struct {
	Event   string
	Payload map[string]any
	At      float64
}

// Run is a run journal to write.
type Run struct {
	ID     string
	Rows   []Row
	Prompt string // the turn journal's submitted content ("": none)
	Raw    string // when set, the file's bytes as they are (malformed journals)
}

// Session is a session to write.
type Session struct {
	ID       string
	Fields   map[string]any // sidecar keys besides the body (override the defaults)
	Messages []map[string]any
	Context  []map[string]any // context_messages (nil: none)
	Runs     []Run
}

// WriteSession writes s into stateDir: its sidecar, its run journals and
// its turn journal.
func WriteSession(stateDir string, s Session) error {
	dir := filepath.Join(stateDir, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	side := FullSidecar(s.ID)
	for k, v := range s.Fields {
		side[k] = v
	}
	side["message_count"] = len(s.Messages)
	side["messages"] = s.Messages
	if s.Context != nil {
		side["context_messages"] = s.Context
	}
	data, err := json.MarshalIndent(side, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, s.ID+".json"), data, 0o600); err != nil {
		return err
	}
	var turns strings.Builder
	for _, r := range s.Runs {
		rdir := filepath.Join(dir, "_run_journal", s.ID)
		if err := os.MkdirAll(rdir, 0o700); err != nil {
			return err
		}
		body := r.Raw
		if body == "" {
			body = JournalLines(s.ID, r.ID, r.Rows)
		}
		if err := os.WriteFile(filepath.Join(rdir, r.ID+".jsonl"), []byte(body), 0o600); err != nil {
			return err
		}
		if r.Prompt != "" {
			at := 0.0
			if len(r.Rows) > 0 {
				at = r.Rows[0].At - 0.5
			}
			for _, ev := range []map[string]any{
				{"version": 1, "event": "submitted", "session_id": s.ID, "turn_id": "20260801T100000Z-0a1b2c3d4e5f", "stream_id": r.ID,
					"created_at": at, "role": "user", "content": r.Prompt, "attachments": []any{}, "workspace": "/home/ann/proj",
					"model": "gpt-5.1", "model_provider": "openai"},
				{"version": 1, "event": "worker_started", "session_id": s.ID, "turn_id": "20260801T100000Z-0a1b2c3d4e5f", "stream_id": r.ID, "created_at": at},
			} {
				b, _ := json.Marshal(ev)
				turns.Write(b)
				turns.WriteByte('\n')
			}
		}
	}
	if turns.Len() > 0 {
		tdir := filepath.Join(dir, "_turn_journal")
		if err := os.MkdirAll(tdir, 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tdir, s.ID+"~4242.jsonl"), []byte(turns.String()), 0o600)
	}
	return nil
}

// JournalLines renders rows as a run journal file: seq from 1, both event
// and type, terminal and terminal_state as WebUI sets them.
func JournalLines(sid, runID string, rows []Row) string {
	var b strings.Builder
	for i, r := range rows {
		state := terminalState(r.Event, r.Payload)
		row := map[string]any{"version": 1, "event_id": runID + ":" + strconv.Itoa(i+1), "seq": i + 1, "run_id": runID,
			"session_id": sid, "event": r.Event, "type": r.Event, "created_at": r.At, "terminal": state != nil,
			"terminal_state": state, "payload": r.Payload}
		data, _ := json.Marshal(row)
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

func terminalState(name string, p map[string]any) any {
	switch name {
	case "done", "stream_end":
		return "completed"
	case "cancel":
		return "interrupted-by-user"
	case "apperror", "error":
		switch p["type"] {
		case "cancelled":
			return "interrupted-by-user"
		case "interrupted":
			return "interrupted-by-crash"
		}
		return "errored"
	}
	return nil
}

// FullSidecar is a sidecar's metadata with every field the formats
// reference documents, in WebUI's key order groups.
func FullSidecar(sid string) map[string]any {
	return map[string]any{
		"session_id": sid, "title": "Fix flaky CI", "manual_title": false, "llm_title_generated": true,
		"created_at": 1786000000.12, "updated_at": 1786000420.5, "pinned": false, "archived": false,
		"project_id": "0f1e2d3c4b5a", "profile": "default", "workspace": "/home/ann/proj", "created_workspace": "/home/ann/proj",
		"model": "gpt-5.1", "model_provider": "openai", "model_explicit_pick_signature": nil, "personality": nil,
		"enabled_toolsets": []string{"terminal", "file"},
		"worktree_path":    nil, "worktree_branch": nil, "worktree_repo_root": nil, "worktree_created_at": nil,
		"input_tokens": 18342, "output_tokens": 911, "cache_read_tokens": 1200, "cache_write_tokens": 40, "estimated_cost": 0.031,
		"context_length": 200000, "threshold_tokens": 160000, "last_prompt_tokens": 9000, "post_compression_context_tokens_estimate": nil,
		"active_stream_id": nil, "pending_user_message": nil, "pending_attachments": []any{}, "pending_started_at": nil, "pending_user_source": nil,
		"parent_session_id": nil, "pre_compression_snapshot": false,
		"compression_anchor_visible_idx": nil, "compression_anchor_message_key": nil, "compression_anchor_summary": nil,
		"context_engine": nil, "compression_anchor_engine": nil, "compression_anchor_mode": nil, "compression_anchor_details": map[string]any{},
		"context_engine_state": map[string]any{}, "compression_recovery": map[string]any{}, "recommended_recovery_action": nil,
		"compression_recovery_source_session_id": nil, "compression_recovery_action": nil,
		"truncation_watermark": nil, "truncation_boundary": nil, "clear_generation": 0, "intentional_shrink_generation": 0,
		"gateway_routing": nil, "gateway_routing_history": []any{},
		"is_cli_session": false, "read_only": false, "source_tag": nil, "raw_source": nil, "session_source": nil, "source_label": nil,
		"composer_draft": map[string]any{"text": "", "files": []any{}}, "process_wakeup_pause": map[string]any{},
		"share_token": nil, "share_created_at": nil,
		"anchor_scene_index": map[string]any{}, "tool_calls": []any{}, "anchor_activity_scenes": map[string]any{},
	}
}

// Conversation is a session with every message shape and a run journal
// of every event name: turn 1 has no journal (an old turn), turn 2 a
// completed run with every event, turn 3 a cancelled run, turn 4 a run
// that crashed (apperror interrupted), turn 5 no journal and an error
// marker; context_messages differ from messages (compression).
func Conversation(sid string, base float64) Session {
	t := func(d float64) float64 { return base + d }
	r2, r3, r4 := runID(sid, 2), runID(sid, 3), runID(sid, 4)
	msgs := []map[string]any{
		{"role": "user", "content": "Why does test_io fail?", "timestamp": t(1.25), "attachments": []string{"log.txt"}},
		{"role": "assistant", "content": "", "reasoning": "Check the log first.", "timestamp": t(3),
			"tool_calls": []any{map[string]any{"id": "call_9x", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"log.txt"}`}}}},
		{"role": "tool", "tool_call_id": "call_9x", "name": "read_file", "content": "E: timeout after 5s", "timestamp": t(4)},
		{"role": "assistant", "content": "It times out; raise the limit.", "timestamp": t(9), "_turnDuration": 8.1, "_usedModel": "gpt-5.1", "_ts": t(9)},
		{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Raise it to 30s and rerun."},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,iVBORw0KGgo="}}}, "timestamp": t(100)},
		{"role": "assistant", "content": "Done: raised to 30s.", "timestamp": t(110), "reasoning": "edit then run",
			"tool_calls": []any{map[string]any{"call_id": "call_b", "type": "function", "function": map[string]any{"name": "terminal", "arguments": `{"cmd":"make test"}`}}}},
		{"role": "tool", "tool_use_id": "call_b", "content": "ok", "timestamp": t(105)},
		{"role": "user", "content": "Now refactor the whole module.", "timestamp": t(200), "_source": "webui"},
		{"role": "assistant", "content": "", "_partial": map[string]any{"text": "Refactoring", "_partial_tool_calls": []any{}}, "timestamp": t(205)},
		{"role": "user", "content": "Try again please.", "timestamp": t(300), "_recovered": true},
		{"role": "assistant", "content": "", "_error": "The run was interrupted.", "type": "interrupted", "interruption_cause": "server_restart", "timestamp": t(302)},
		{"role": "user", "content": "One more question.", "timestamp": t(400)},
		{"role": "assistant", "content": "Sorry, the provider failed.", "_error": "quota exhausted", "timestamp": t(401)},
	}
	ctx := []map[string]any{
		{"role": "user", "content": "[CONTEXT COMPACTION] earlier: a flaky test_io, timeouts raised to 30s"},
		{"role": "assistant", "content": "Understood; continuing from the summary."},
		{"role": "user", "content": "One more question."},
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "x", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "c1", "content": "tool output"},
		{"role": "assistant", "content": "Answer after the tool."},
	}
	sess := map[string]any{"session_id": sid, "messages": []any{map[string]any{"role": "user", "content": "…"}}, "tool_calls": []any{}, "message_count": 1}
	every := []Row{
		{"context_status", map[string]any{"session_id": sid, "prefill": map[string]any{}}, t(100.5)},
		{"title_status", map[string]any{"session_id": sid, "status": "pending"}, t(100.6)},
		{"reasoning", map[string]any{"text": "edit "}, t(101)},
		{"reasoning", map[string]any{"text": "then run"}, t(101.1)},
		{"interim_assistant", map[string]any{"text": "Editing the config.", "already_streamed": false}, t(101.2)},
		{"tool", map[string]any{"event_type": "tool.started", "name": "terminal", "preview": "make test", "args": map[string]any{"cmd": "make test"}, "tid": "call_b"}, t(102)},
		{"todo_state", map[string]any{"session_id": sid, "stream_id": r2, "source": "agent", "ts": t(102.5), "items": []any{}}, t(102.5)},
		{"metering", map[string]any{"tps": 41.5, "tps_available": true, "estimated": false, "high": 50, "low": 30, "active": true, "session_id": sid,
			"usage": map[string]any{"input_tokens": 1200, "output_tokens": 30}}, t(103)},
		{"approval", map[string]any{"approval_id": "ap_1", "command": "make test", "description": "run the test suite", "pattern_key": "make",
			"pattern_keys": []string{"make"}, "pending_count": 1, "run_id": r2}, t(103.5)},
		{"clarify", map[string]any{"clarify_id": "cl_1", "question": "Which timeout?", "choices_offered": []string{"10s", "30s"}, "session_id": sid,
			"kind": "clarify", "requested_at": t(103.7), "timeout_seconds": 120}, t(103.7)},
		{"tool_complete", map[string]any{"event_type": "tool.completed", "name": "terminal", "preview": "ok", "args": map[string]any{"cmd": "make test"},
			"tid": "call_b", "duration": 1.5, "is_error": false}, t(105)},
		{"warning", map[string]any{"type": "fallback", "message": "fell back to gpt-5.1-mini"}, t(105.5)},
		{"compressing", map[string]any{"session_id": sid, "message": "compressing context"}, t(105.6)},
		{"compressed", map[string]any{"session_id": sid, "old_session_id": sid, "new_session_id": sid, "continuation_session_id": nil,
			"message": "compressed", "usage": map[string]any{}}, t(105.7)},
		{"state_saved", map[string]any{"session_id": sid, "kind": "memory", "action": "add", "name": "timeouts"}, t(105.8)},
		{"goal", map[string]any{"session_id": sid, "state": "active", "message": "keep CI green", "message_key": "goal.set", "message_args": map[string]any{}}, t(105.9)},
		{"goal_continue", map[string]any{"session_id": sid, "continuation_prompt": "continue", "text": "continue", "message": "continuing", "decision": "continue"}, t(106)},
		{"pending_steer_leftover", map[string]any{"session_id": sid, "text": "also update docs"}, t(106.1)},
		{"token", map[string]any{"text": "Done: "}, t(107)},
		{"token", map[string]any{"text": "raised to 30s."}, t(108)},
		{"done", map[string]any{"session": sess, "usage": map[string]any{"input_tokens": 1200, "output_tokens": 40, "estimated_cost": 0.01,
			"cache_read_tokens": 0, "cache_write_tokens": 0, "cache_hit_percent": 0, "turn_cache_hit_percent": 0, "context_length": 200000,
			"threshold_tokens": 160000, "last_prompt_tokens": 1200, "post_compression_context_tokens_estimate": nil, "duration_seconds": 8.5},
			"terminal_state": "completed"}, t(110)},
		{"title", map[string]any{"session_id": sid, "title": "Fix flaky CI"}, t(110.5)},
		{"stream_end", map[string]any{"session_id": sid}, t(110.6)},
	}
	return Session{ID: sid, Messages: msgs, Context: ctx, Runs: []Run{
		{ID: r2, Rows: every, Prompt: "Raise it to 30s and rerun."},
		{ID: r3, Prompt: "Now refactor the whole module.", Rows: []Row{
			{"token", map[string]any{"text": "Refactoring"}, t(201)},
			{"cancel", map[string]any{"message": "Cancelled by user", "type": "cancelled", "status": "cancelled", "session_id": sid}, t(205)},
		}},
		{ID: r4, Prompt: "Try again please.", Rows: []Row{
			{"context_status", map[string]any{"session_id": sid, "prefill": map[string]any{}}, t(300.5)},
			{"apperror", map[string]any{"message": "The run was interrupted.", "type": "interrupted", "hint": "reload", "details": "worker died"}, t(302)},
		}},
	}}
}

// runID is a WebUI run id (32 hex) derived from a session and a turn.
func runID(sid string, turn int) string {
	h := uint64(14695981039346656037)
	for _, c := range sid + "/" + strconv.Itoa(turn) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Sprintf("%016x%016x", h, h*31+7)
}

// RunID is the run id Conversation gives turn n of session sid.
func RunID(sid string, turn int) string { return runID(sid, turn) }
