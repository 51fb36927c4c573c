package hermeswebui

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A WebUI state directory (docs/hermes-webui.md, "What is migrated"):
//
//	sessions/<sid>.json                       one session's sidecar
//	sessions/_run_journal/<sid>/<run>.jsonl   a run's SSE event journal
//	sessions/_turn_journal/<sid>~<pid>.jsonl  the session's turn log (and a legacy <sid>.jsonl)
//
// Files named _*.json (the index, tombstones), *.bak and temp files
// (<sid>.tmp.<pid>.<tid>) are not sessions.

// Limits bound what the reader loads.
type Limits struct {
	// SidecarBytes bounds one session file (default 256 MiB).
	SidecarBytes int64
	// JournalBytes bounds one run journal file (default 256 MiB).
	JournalBytes int64
}

func (l Limits) orDefault() Limits {
	if l.SidecarBytes <= 0 {
		l.SidecarBytes = 256 << 20
	}
	if l.JournalBytes <= 0 {
		l.JournalBytes = 256 << 20
	}
	return l
}

// Skip is a file the reader did not import, and why.
type Skip struct {
	Path   string
	Reason string
}

// SessionFile is a session sidecar found in a state directory.
type SessionFile struct {
	ID   string // the file's stem
	Path string
}

// Scan lists the session sidecars of a state directory in name order, and
// the files in sessions/ it passes over that are neither sessions nor
// WebUI's known bookkeeping (reported, not errors).
func Scan(stateDir string) ([]SessionFile, []Skip, error) {
	dir := filepath.Join(stateDir, "sessions")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w (want a hermes-webui state directory: STATE_DIR/sessions/<sid>.json)", stateDir, err)
	}
	var files []SessionFile
	var skips []Skip
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case e.IsDir(), strings.HasPrefix(name, "_"):
			// _run_journal, _turn_journal, _index.json, tombstones
		case strings.HasSuffix(name, ".bak"):
			skips = append(skips, Skip{path, "a backup (.bak) of a session, not a session"})
		case strings.Contains(name, ".tmp."):
			skips = append(skips, Skip{path, "a temporary file of an interrupted save"})
		case strings.HasSuffix(name, ".json"):
			files = append(files, SessionFile{ID: strings.TrimSuffix(name, ".json"), Path: path})
		default:
			skips = append(skips, Skip{path, "not a session file"})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].ID < files[j].ID })
	return files, skips, nil
}

// Message is one message of a sidecar's messages or context_messages
// (OpenAI chat shape plus WebUI's display keys); Raw keeps it whole.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Reasoning  string          `json:"reasoning"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	ToolUseID  string          `json:"tool_use_id"`
	Name       string          `json:"name"`
	Timestamp  json.Number     `json:"timestamp"`
	TS         json.Number     `json:"_ts"`
	Error      json.RawMessage `json:"_error"`
	Type       string          `json:"type"`
	Partial    json.RawMessage `json:"_partial"`
	UsedModel  string          `json:"_usedModel"`
}

// ToolCall is an assistant message's tool call.
type ToolCall struct {
	ID       string `json:"id"`
	CallID   string `json:"call_id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Time is the message's timestamp (_ts first, as WebUI's UI reads it), or 0.
func (m *Message) Time() float64 {
	for _, n := range []json.Number{m.TS, m.Timestamp} {
		if f, err := n.Float64(); err == nil && f > 0 {
			return f
		}
	}
	return 0
}

// Text is the message's text: content as a string, or its text parts
// joined.
func (m *Message) Text() string { return contentText(m.Content) }

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Sidecar is a session file: the fields the importer uses. Meta keeps
// every metadata key (everything but the transcript bodies) as written.
type Sidecar struct {
	SessionID              string    `json:"session_id"`
	Title                  string    `json:"title"`
	CreatedAt              float64   `json:"created_at"`
	UpdatedAt              float64   `json:"updated_at"`
	Profile                *string   `json:"profile"`
	Workspace              string    `json:"workspace"`
	Model                  string    `json:"model"`
	ModelProvider          *string   `json:"model_provider"`
	EnabledToolsets        []string  `json:"enabled_toolsets"`
	ParentSessionID        *string   `json:"parent_session_id"`
	PreCompressionSnapshot bool      `json:"pre_compression_snapshot"`
	ActiveStreamID         *string   `json:"active_stream_id"`
	PendingUserMessage     *string   `json:"pending_user_message"`
	PendingStartedAt       *float64  `json:"pending_started_at"`
	Messages               []Message `json:"messages"`
	ContextMessages        []Message `json:"context_messages"`

	Meta map[string]json.RawMessage `json:"-"`
}

// bodyKeys are the sidecar keys that are transcript, not metadata.
var bodyKeys = map[string]bool{"messages": true, "context_messages": true, "tool_calls": true,
	"anchor_activity_scenes": true, "anchor_scene_index": true, "composer_draft": true}

// ReadSidecar reads and checks a session file.
func ReadSidecar(f SessionFile, lim Limits) (*Sidecar, error) {
	lim = lim.orDefault()
	data, err := readBounded(f.Path, lim.SidecarBytes)
	if err != nil {
		return nil, err
	}
	var s Sidecar
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("not a session file: %s", jsonErr(err))
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("not a session file: %s", jsonErr(err))
	}
	s.Meta = map[string]json.RawMessage{}
	for k, v := range all {
		if !bodyKeys[k] && !strings.HasPrefix(k, "_") {
			s.Meta[k] = v
		}
	}
	switch {
	case s.SessionID == "":
		return nil, errors.New("no session_id")
	case s.SessionID != f.ID:
		return nil, fmt.Errorf("session_id %q is not the file's name", trunc(s.SessionID))
	}
	return &s, nil
}

// readBounded reads a file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() > limit {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("over the limit of %d bytes", limit)
	}
	return data, nil
}

func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: has the wrong JSON type", te.Field)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "truncated JSON"
	}
	return err.Error()
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Row is one row of a WebUI run journal.
type Row struct {
	Version       int             `json:"version"`
	EventID       string          `json:"event_id"`
	Seq           uint64          `json:"seq"`
	RunID         string          `json:"run_id"`
	SessionID     string          `json:"session_id"`
	Event         string          `json:"event"`
	Type          string          `json:"type"`
	CreatedAt     float64         `json:"created_at"`
	Terminal      bool            `json:"terminal"`
	TerminalState *string         `json:"terminal_state"`
	Payload       json.RawMessage `json:"payload"`
}

// Name is the row's event name (event, else type).
func (r *Row) Name() string {
	if r.Event != "" {
		return r.Event
	}
	return r.Type
}

// RunJournal is one run's journal file.
type RunJournal struct {
	RunID string
	Path  string
	Rows  []Row
}

// Start is the run's first row's time.
func (j *RunJournal) Start() float64 {
	if len(j.Rows) == 0 {
		return 0
	}
	return j.Rows[0].CreatedAt
}

// ReadRunJournals reads the run journals of session sid. A file that is
// not a whole, gapless journal of this session (a bad line, a truncated
// last line, a seq gap, a foreign run or session id) is skipped and
// reported: its turn is then taken from the sidecar's transcript.
func ReadRunJournals(stateDir, sid string, lim Limits) ([]RunJournal, []Skip) {
	lim = lim.orDefault()
	dir := filepath.Join(stateDir, "sessions", "_run_journal", sid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []Skip{{dir, err.Error()}}
	}
	var out []RunJournal
	var skips []Skip
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			skips = append(skips, Skip{path, "not a run journal (.jsonl)"})
			continue
		}
		j, err := readRunJournal(path, strings.TrimSuffix(e.Name(), ".jsonl"), sid, lim.JournalBytes)
		if err != nil {
			skips = append(skips, Skip{path, "malformed run journal: " + err.Error()})
			continue
		}
		if len(j.Rows) == 0 {
			skips = append(skips, Skip{path, "an empty run journal"})
			continue
		}
		out = append(out, j)
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].Start() < out[k].Start() })
	return out, skips
}

func readRunJournal(path, runID, sid string, limit int64) (RunJournal, error) {
	j := RunJournal{RunID: runID, Path: path}
	data, err := readBounded(path, limit)
	if err != nil {
		return j, err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return j, errors.New("the last line is truncated")
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), int(limit)+1)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return j, fmt.Errorf("line %d: %s", line, jsonErr(err))
		}
		switch {
		case r.Seq != uint64(len(j.Rows))+1:
			return j, fmt.Errorf("line %d: seq %d, want %d (not gapless)", line, r.Seq, len(j.Rows)+1)
		case r.RunID != "" && r.RunID != runID:
			return j, fmt.Errorf("line %d: run_id %q is not the file's", line, trunc(r.RunID))
		case r.SessionID != "" && r.SessionID != sid:
			return j, fmt.Errorf("line %d: session_id %q is not the directory's", line, trunc(r.SessionID))
		case r.Name() == "":
			return j, fmt.Errorf("line %d: no event name", line)
		}
		if len(r.Payload) == 0 {
			r.Payload = json.RawMessage(`{}`)
		}
		j.Rows = append(j.Rows, r)
	}
	if err := sc.Err(); err != nil {
		return j, err
	}
	return j, nil
}

// Submission is a turn journal's submitted row: the exact prompt of a
// turn, when WebUI took it, and the turn's id.
type Submission struct {
	Prompt string
	At     float64 // the row's created_at (epoch seconds; 0: none)
	TurnID string
}

// Prompts reads the turn journal of session sid: the exact submitted
// prompt of each run, by stream id (Submissions without the times).
func Prompts(stateDir, sid string, lim Limits) (map[string]string, []Skip) {
	subs, skips := Submissions(stateDir, sid, lim)
	out := make(map[string]string, len(subs))
	for id, s := range subs {
		out[id] = s.Prompt
	}
	return out, skips
}

// Submissions reads the turn journal of session sid (every pid shard and
// the legacy file): the submitted row of each run, by stream id (WebUI's
// run journal is named by it). A line that does not parse is skipped and
// its file reported.
func Submissions(stateDir, sid string, lim Limits) (map[string]Submission, []Skip) {
	lim = lim.orDefault()
	dir := filepath.Join(stateDir, "sessions", "_turn_journal")
	paths, _ := filepath.Glob(filepath.Join(dir, globEscape(sid)+"~*.jsonl"))
	if _, err := os.Stat(filepath.Join(dir, sid+".jsonl")); err == nil {
		paths = append(paths, filepath.Join(dir, sid+".jsonl"))
	}
	out := map[string]Submission{}
	var skips []Skip
	for _, p := range paths {
		data, err := readBounded(p, lim.JournalBytes)
		if err != nil {
			skips = append(skips, Skip{p, err.Error()})
			continue
		}
		bad := 0
		for i, ln := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(ln)) == 0 {
				continue
			}
			var r struct {
				Event     string  `json:"event"`
				StreamID  string  `json:"stream_id"`
				TurnID    string  `json:"turn_id"`
				Content   string  `json:"content"`
				CreatedAt float64 `json:"created_at"`
			}
			if json.Unmarshal(ln, &r) != nil {
				bad++
				if bad == 1 {
					skips = append(skips, Skip{p, "turn journal line " + strconv.Itoa(i+1) + " does not parse (its other lines are used)"})
				}
				continue
			}
			if r.Event == "submitted" && r.StreamID != "" {
				out[r.StreamID] = Submission{Prompt: r.Content, At: r.CreatedAt, TurnID: r.TurnID}
			}
		}
	}
	return out, skips
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}
