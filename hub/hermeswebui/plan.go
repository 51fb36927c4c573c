package hermeswebui

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/protocol"
)

// ImportSource is the source of an imported run's start request.
const ImportSource = "hermes-webui-import"

// HistoryKey is the key of a run's start request (journal.RunMeta.Request)
// that holds the conversation history an import brought along (WebUI's
// context_messages as [{role, content}]): drivers send it, instead of the
// runs before, as the history of the session's next turn
// (adapter/driver.SessionTranscript).
const HistoryKey = driver.HistoryKey

// PlannedRun is one run an import writes: its events are unsequenced (the
// journal numbers them 1, 2, …: a run from a WebUI journal keeps each row's
// seq) and the last is the terminal.
type PlannedRun struct {
	ID        string
	CreatedAt float64
	Request   json.RawMessage
	Events    []protocol.Envelope
	From      string // the run journal's path, or "transcript"
	Trimmed   int    // events whose payload was cut to the journal's bound
}

// PlannedSession is one session an import writes.
type PlannedSession struct {
	ID        string
	Title     string
	CreatedAt float64
	Runs      []PlannedRun
}

// Input is what the importer read of one session.
type Input struct {
	Sidecar  *Sidecar
	Journals []RunJournal
	// Submitted is the turn journal's submitted row of each run, by stream
	// id (Submissions): a journal is matched to its turn by it.
	Submitted map[string]Submission
	// Prompts is the submitted prompt of each run by stream id, without
	// the times (Prompts), for callers that read only those; Submitted
	// wins.
	Prompts map[string]string
	// Now is the import's time: the time of each run's terminal event, so
	// the hub's retention counts from the import (the original time stays
	// in the event's webui.created_at).
	Now float64
}

// turn is one user message and the replies that follow it.
type turn struct {
	user    *Message
	replies []Message
	at      float64
}

func splitTurns(msgs []Message) []turn {
	var out []turn
	for i := range msgs {
		m := msgs[i]
		if m.Role == "user" || len(out) == 0 {
			t := turn{at: m.Time()}
			if m.Role == "user" {
				t.user = &msgs[i]
			} else {
				t.replies = append(t.replies, m)
			}
			out = append(out, t)
			continue
		}
		last := &out[len(out)-1]
		last.replies = append(last.replies, m)
		if last.at == 0 {
			last.at = m.Time()
		}
	}
	return out
}

// Plan turns one session into the runs an import writes: each run journal
// replayed row for row (names mapped, see the table in
// docs/hermes-webui.md), each turn of the transcript no journal covers
// synthesized into a run, oldest first; the last run carries the
// session's context_messages as the history of the next turn.
func Plan(in Input) PlannedSession {
	s := in.Sidecar
	ps := PlannedSession{ID: s.SessionID, Title: s.Title, CreatedAt: s.CreatedAt}
	turns := splitTurns(s.Messages)
	if pm := s.PendingUserMessage; pm != nil && *pm != "" {
		last := len(turns) - 1
		if last < 0 || turns[last].user == nil || turns[last].user.Text() != *pm {
			at := 0.0
			if s.PendingStartedAt != nil {
				at = *s.PendingStartedAt
			}
			raw, _ := json.Marshal(*pm)
			turns = append(turns, turn{user: &Message{Role: "user", Content: raw}, at: at})
		}
	}
	subs := in.Submitted
	if subs == nil {
		subs = map[string]Submission{}
		for id, p := range in.Prompts {
			subs[id] = Submission{Prompt: p}
		}
	}
	covered := make([]*RunJournal, len(turns))
	type item struct {
		at  float64
		run PlannedRun
	}
	var items []item
	match := matchJournals(turns, in.Journals, subs)
	for k := range in.Journals {
		j := &in.Journals[k]
		i := match[k]
		if i >= 0 {
			covered[i] = j
		}
		sub := subs[j.RunID]
		sub.Prompt = barePrompt(sub.Prompt)
		if sub.Prompt == "" && i >= 0 && turns[i].user != nil {
			sub.Prompt = turns[i].user.Text()
		}
		items = append(items, item{j.Start(), journalRun(s, j, sub, in.Now)})
	}
	for i, t := range turns {
		if covered[i] != nil {
			continue
		}
		cut := i == len(turns)-1 && (s.ActiveStreamID != nil && *s.ActiveStreamID != "" || s.PendingUserMessage != nil && *s.PendingUserMessage != "")
		items = append(items, item{t.at, transcriptRun(s, i, t, cut, in.Now)})
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].at < items[b].at })
	for _, it := range items {
		ps.Runs = append(ps.Runs, it.run)
	}
	if n := len(ps.Runs); n > 0 {
		last := &ps.Runs[n-1]
		var req map[string]any
		json.Unmarshal(last.Request, &req)
		md, _ := req["metadata"].(map[string]any)
		hw, _ := md["hermes_webui"].(map[string]any)
		hw["session"] = s.Meta
		if h := History(s.ContextMessages); h != nil {
			req[HistoryKey] = h
		}
		last.Request, _ = json.Marshal(req)
	}
	return ps
}

// runID is a synthesized run's id: the session id and the turn, within the
// journal's id bound.
func runID(sid string, i int) string {
	id := sid + ".t" + strconv.Itoa(i+1)
	if len(id) <= protocol.MaxIDLen && protocol.ValidID(id) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(sid))
	return "webui-" + hex.EncodeToString(sum[:16]) + ".t" + strconv.Itoa(i+1)
}

func request(s *Sidecar, message, from string) json.RawMessage {
	req := map[string]any{"session_id": s.SessionID, "message": message, "workspace": s.Workspace,
		"model": s.Model, "source": ImportSource,
		"metadata": map[string]any{"hermes_webui": map[string]any{"from": from}}}
	if s.ModelProvider != nil {
		req["provider"] = *s.ModelProvider
	}
	if len(s.EnabledToolsets) > 0 {
		req["toolsets"] = s.EnabledToolsets
	}
	raw, _ := json.Marshal(req)
	return raw
}

// History converts context_messages to the turns drivers send: user and
// assistant messages with text (tool rows and tool-only messages are
// folded away), the newest kept within maxHistoryBytes. Nil when there
// are none.
func History(msgs []Message) []map[string]string {
	var out []map[string]string
	size := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != "user" && m.Role != "assistant" {
			continue
		}
		text := m.Text()
		if text == "" {
			continue
		}
		if size += len(text); size > maxHistoryBytes {
			break
		}
		out = append(out, map[string]string{"role": m.Role, "content": text})
	}
	for i, k := 0, len(out)-1; i < k; i, k = i+1, k-1 {
		out[i], out[k] = out[k], out[i]
	}
	return out
}

// maxHistoryBytes bounds the imported history's text.
const maxHistoryBytes = 4 << 20

// event builds an unsequenced event.
func event(runID, sid string, typ protocol.EventType, at float64, payload any) protocol.Envelope {
	raw, _ := json.Marshal(payload)
	return protocol.Envelope{RunID: runID, SessionID: sid, Type: typ, CreatedAt: at, Payload: raw,
		Terminal: protocol.IsTerminal(typ, raw)}
}

// transcriptRun synthesizes the run of a turn no journal covers.
func transcriptRun(s *Sidecar, i int, t turn, cut bool, now float64) PlannedRun {
	id, sid := runID(s.SessionID, i), s.SessionID
	user := ""
	if t.user != nil {
		user = t.user.Text()
	}
	at := t.at
	if at == 0 {
		at = s.CreatedAt
	}
	provider := ""
	if s.ModelProvider != nil {
		provider = *s.ModelProvider
	}
	r := PlannedRun{ID: id, CreatedAt: at, Request: request(s, user, "transcript"), From: "transcript"}
	add := func(typ protocol.EventType, p any) { r.Events = append(r.Events, event(id, sid, typ, at, p)) }
	add(protocol.EventRunStarted, protocol.RunStartedPayload{Message: user, Model: s.Model, Provider: provider,
		Workspace: s.Workspace, Toolsets: nonNil(s.EnabledToolsets), Source: ImportSource})
	open := map[string]bool{}
	var last *Message
	model := s.Model
	for k := range t.replies {
		m := &t.replies[k]
		if ts := m.Time(); ts > 0 {
			at = ts
		}
		switch m.Role {
		case "assistant":
			last = m
			if m.UsedModel != "" {
				model = m.UsedModel
			}
			block := "b" + strconv.Itoa(k+1)
			if m.Reasoning != "" {
				for _, c := range chunks(m.Reasoning) {
					add(protocol.EventReasoningDelta, protocol.ReasoningPayload{BlockID: block, Text: c})
				}
				add(protocol.EventReasoningDone, protocol.ReasoningPayload{BlockID: block, Text: ""})
			}
			if text := m.Text(); text != "" && !isError(m) {
				for _, c := range chunks(text) {
					add(protocol.EventTokenDelta, protocol.TokenDeltaPayload{MessageID: "m" + strconv.Itoa(k+1), Text: c})
				}
			}
			for _, tc := range m.ToolCalls {
				tid := tc.ID
				if tid == "" {
					tid = tc.CallID
				}
				if tid == "" {
					tid = "t" + strconv.Itoa(k+1)
				}
				open[tid] = true
				add(protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: tid, Name: tc.Function.Name, Args: toolArgs(tc.Function.Arguments)})
			}
		case "tool":
			tid := m.ToolCallID
			if tid == "" {
				tid = m.ToolUseID
			}
			if tid == "" {
				tid = "t" + strconv.Itoa(k+1)
			}
			if !open[tid] {
				add(protocol.EventToolStarted, protocol.ToolStartedPayload{ToolCallID: tid, Name: m.Name, Args: json.RawMessage(`{}`)})
			}
			delete(open, tid)
			result, _ := json.Marshal(protocol.Truncate(m.Text(), 64<<10))
			add(protocol.EventToolDone, protocol.ToolDonePayload{ToolCallID: tid, Status: "ok", Result: result})
		}
	}
	at = now
	switch {
	case last != nil && isError(last):
		code, msg := protocol.ErrorProviderError, errorText(last)
		if last.Type == "interrupted" {
			code = protocol.ErrorInterrupted
		}
		add(protocol.EventError, protocol.ErrorPayload{Code: code, Message: msg, Terminal: true})
	case cut && last == nil:
		add(protocol.EventError, protocol.ErrorPayload{Code: protocol.ErrorInterrupted, Message: "the turn was cut off before WebUI saved an answer", Terminal: true})
	default:
		add(protocol.EventDone, protocol.DonePayload{Status: string(protocol.StatusCompleted), Usage: &protocol.Usage{Model: model, Provider: provider}})
	}
	return r
}

// chunkBytes bounds the text of one synthesized delta, well within the
// journal's payload bound.
const chunkBytes = 64 << 10

// chunks cuts text into deltas of at most chunkBytes, on rune boundaries;
// they concatenate to text.
func chunks(text string) []string {
	var out []string
	for len(text) > chunkBytes {
		i := chunkBytes
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	return append(out, text)
}

func isError(m *Message) bool {
	return len(m.Error) > 0 && string(m.Error) != "null" && string(m.Error) != "false"
}

func errorText(m *Message) string {
	var s string
	if json.Unmarshal(m.Error, &s) == nil && s != "" {
		return protocol.Truncate(s, 4096)
	}
	if t := m.Text(); t != "" {
		return protocol.Truncate(t, 4096)
	}
	return "the turn ended with an error"
}

// toolArgs is a tool call's arguments as JSON: the JSON-encoded string
// decoded, else the string itself.
func toolArgs(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if json.Valid([]byte(s)) && s != "" {
			return json.RawMessage(s)
		}
		b, _ := json.Marshal(s)
		return b
	}
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}

// payloadMap decodes a row's payload as an object (empty when it is not).
func payloadMap(raw json.RawMessage) map[string]any {
	var m map[string]any
	json.Unmarshal(raw, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func getStr(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func getNum(m map[string]any, key string) float64 {
	f, _ := m[key].(float64)
	return f
}

func getStrs(m map[string]any, key string) []string {
	out := []string{}
	list, _ := m[key].([]any)
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// errorCode is runhub's error code of a WebUI apperror type.
func errorCode(typ string) string {
	switch typ {
	case "interrupted":
		return protocol.ErrorInterrupted
	case "no_response":
		return protocol.ErrorTimeout
	case "", "error":
		return protocol.ErrorProviderError
	}
	return typ
}
