package hermeswebui

import (
	"encoding/json"
	"strconv"

	"github.com/runhub/runhub/protocol"
)

// journalRun replays a run journal: run.started with the turn's prompt
// first (seq 1, at the time WebUI took the prompt), then row n as event
// seq n+1 (names mapped to runhub's types, the row kept whole under
// webui), the last row the terminal event; a journal without a terminal
// row gets one more event, as WebUI itself reports such a run
// (interrupted).
func journalRun(s *Sidecar, j *RunJournal, sub Submission, now float64) PlannedRun {
	id, sid := j.RunID, s.SessionID
	r := PlannedRun{ID: id, CreatedAt: j.Start(), Request: request(s, sub.Prompt, "run journal"), From: j.Path}
	startAt := j.Start()
	if sub.At > 0 && sub.At <= startAt {
		startAt = sub.At
	}
	provider := ""
	if s.ModelProvider != nil {
		provider = *s.ModelProvider
	}
	r.Events = append(r.Events, event(id, sid, protocol.EventRunStarted, startAt, protocol.RunStartedPayload{Message: sub.Prompt,
		Model: s.Model, Provider: provider, Workspace: s.Workspace, Toolsets: nonNil(s.EnabledToolsets), Source: ImportSource}))
	tids := map[string][]string{} // open tool ids by name
	var usage *protocol.Usage
	sawDone := false
	for i, row := range j.Rows {
		name, p := row.Name(), payloadMap(row.Payload)
		isLast := i == len(j.Rows)-1
		at := row.CreatedAt
		var typ protocol.EventType
		var mapped map[string]any
		switch name {
		case "token":
			typ, mapped = protocol.EventTokenDelta, map[string]any{"message_id": "m1", "text": getStr(p, "text")}
		case "reasoning":
			typ, mapped = protocol.EventReasoningDelta, map[string]any{"block_id": "b1", "text": getStr(p, "text")}
		case "tool":
			tid := getStr(p, "tid")
			if tid == "" {
				tid = "t" + strconv.FormatUint(row.Seq, 10)
			}
			tname := getStr(p, "name")
			tids[tname] = append(tids[tname], tid)
			args, _ := json.Marshal(p["args"])
			if p["args"] == nil {
				args = []byte(`{}`)
			}
			typ, mapped = protocol.EventToolStarted, map[string]any{"tool_call_id": tid, "name": tname, "args": json.RawMessage(args)}
		case "tool_complete":
			tname := getStr(p, "name")
			tid := getStr(p, "tid")
			if open := tids[tname]; tid == "" && len(open) > 0 {
				tid = open[0]
			}
			if tid == "" {
				tid = "t" + strconv.FormatUint(row.Seq, 10)
			}
			for k, t := range tids[tname] {
				if t == tid {
					tids[tname] = append(tids[tname][:k:k], tids[tname][k+1:]...)
					break
				}
			}
			isErr, _ := p["is_error"].(bool)
			status := "ok"
			if isErr {
				status = "error"
			}
			result, _ := json.Marshal(getStr(p, "preview", "snippet"))
			typ, mapped = protocol.EventToolDone, map[string]any{"tool_call_id": tid, "status": status,
				"duration_ms": int64(getNum(p, "duration") * 1000), "error": isErr, "result": json.RawMessage(result)}
		case "approval":
			choices := getStrs(p, "choices")
			if len(choices) == 0 {
				choices = []string{"once", "session", "always", "deny"}
			}
			typ, mapped = protocol.EventApprovalReq, map[string]any{"approval_id": getStr(p, "approval_id"),
				"summary": getStr(p, "description", "command"), "risk": "", "choices": choices}
		case "clarify":
			choices := getStrs(p, "choices_offered")
			mode := "text"
			if len(choices) > 0 {
				mode = "choice"
			}
			typ, mapped = protocol.EventClarifyReq, map[string]any{"clarify_id": getStr(p, "clarify_id"),
				"question": getStr(p, "question"), "choices": choices, "input_mode": mode}
		case "metering":
			u, _ := p["usage"].(map[string]any)
			typ, mapped = protocol.EventUsageUpdated, map[string]any{"input_tokens": int64(getNum(u, "input_tokens")),
				"output_tokens": int64(getNum(u, "output_tokens")), "model": "", "provider": "", "duration_ms": 0}
		case "title":
			typ, mapped = protocol.EventTitleUpdated, map[string]any{"title": protocol.Truncate(getStr(p, "title"), 512), "source": "hermes-webui"}
		case "goal":
			state := getStr(p, "state")
			switch state {
			case protocol.GoalActive, protocol.GoalPaused, protocol.GoalCleared, protocol.GoalDone:
			default:
				state = protocol.GoalActive
			}
			typ, mapped = protocol.EventGoalUpdated, map[string]any{"state": state, "text": getStr(p, "message", "text")}
		case "done", "stream_end":
			if name == "done" {
				sawDone = true
				u, _ := p["usage"].(map[string]any)
				usage = &protocol.Usage{InputTokens: int64(getNum(u, "input_tokens")), OutputTokens: int64(getNum(u, "output_tokens")),
					Model: s.Model, DurationMS: int64(getNum(u, "duration_seconds") * 1000)}
			}
			switch {
			case isLast:
				u := usage
				if u == nil {
					u = &protocol.Usage{}
				}
				typ, mapped = protocol.EventDone, map[string]any{"status": "completed", "usage": u}
			case name == "done":
				typ, mapped = protocol.EventUsageFinal, map[string]any{"input_tokens": usage.InputTokens,
					"output_tokens": usage.OutputTokens, "model": usage.Model, "provider": "", "duration_ms": usage.DurationMS}
			default:
				typ, mapped = protocol.EventProgress, map[string]any{"text": ""}
			}
		case "cancel", "apperror", "error":
			msg := protocol.Truncate(getStr(p, "message", "error"), 4096)
			etype := getStr(p, "type")
			switch {
			case isLast && (name == "cancel" || etype == "cancelled"):
				typ, mapped = protocol.EventCancelled, map[string]any{"reason": msg, "partial": false}
			case name == "cancel":
				typ, mapped = protocol.EventProgress, map[string]any{"text": msg}
			default:
				typ, mapped = protocol.EventError, map[string]any{"code": errorCode(etype), "message": msg, "terminal": isLast}
			}
		default:
			// interim_assistant, warning, compressing, compressed,
			// context_status, todo_state, state_saved, goal_continue,
			// pending_steer_leftover, title_status, and names to come.
			typ, mapped = protocol.EventProgress, map[string]any{"text": protocol.Truncate(getStr(p, "text", "message"), 1024)}
		}
		if isLast && protocol.IsTerminal(typ, mustJSON(mapped)) {
			at = now
		}
		e, trimmed := withOriginal(id, sid, typ, at, mapped, name, row.Payload, row.CreatedAt)
		if trimmed {
			r.Trimmed++
		}
		r.Events = append(r.Events, e)
	}
	if last := r.Events[len(r.Events)-1]; !last.Terminal {
		if sawDone {
			u := usage
			r.Events = append(r.Events, event(id, sid, protocol.EventDone, now, protocol.DonePayload{Status: "completed", Usage: u}))
		} else {
			r.Events = append(r.Events, event(id, sid, protocol.EventError, now, protocol.ErrorPayload{Code: protocol.ErrorInterrupted,
				Message: "the run's journal ends without a terminal event (lost worker)", Terminal: true, LastSeq: uint64(len(r.Events))}))
		}
	}
	return r
}

func mustJSON(v any) json.RawMessage {
	raw, _ := json.Marshal(v)
	return raw
}

// payloadRoom is the journal's payload bound less room for redaction.
const payloadRoom = protocol.MaxPayloadBytes - 8<<10

// withOriginal builds the event of a journal row: the mapped payload plus
// the row under webui. A payload over the journal's bound loses done's
// embedded session first, then the original; trimmed says so.
func withOriginal(id, sid string, typ protocol.EventType, at float64, mapped map[string]any, name string, orig json.RawMessage, origAt float64) (protocol.Envelope, bool) {
	o := map[string]any{"event": name, "payload": orig, "created_at": origAt}
	mapped[Original] = o
	e := event(id, sid, typ, at, mapped)
	if len(e.Payload) <= payloadRoom {
		return e, false
	}
	if p := payloadMap(orig); p["session"] != nil {
		p["session"] = map[string]any{"session_id": sid, "_omitted": "the whole session; the import keeps it as the session's runs"}
		o["payload"] = p
		if e = event(id, sid, typ, at, mapped); len(e.Payload) <= payloadRoom {
			return e, true
		}
	}
	delete(mapped, Original)
	for _, k := range []string{"text", "summary", "question", "message", "reason"} {
		if s, ok := mapped[k].(string); ok {
			mapped[k] = protocol.Truncate(s, 64<<10)
		}
	}
	if r, ok := mapped["result"].(json.RawMessage); ok && len(r) > 64<<10 {
		mapped["result"] = json.RawMessage(`"(trimmed)"`)
	}
	return event(id, sid, typ, at, mapped), true
}
