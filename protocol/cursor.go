package protocol

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxIDLen bounds run, session and other identifiers on the wire.
const MaxIDLen = 128

// Cursor names a position in a run's event stream: the event with Seq in
// RunID. Its text form is "run_id:seq", the same as an event_id.
type Cursor struct {
	RunID string
	Seq   uint64
}

// String formats the cursor as "run_id:seq".
func (c Cursor) String() string { return EventID(c.RunID, c.Seq) }

// EventID formats the event id (and cursor) of seq in runID.
func EventID(runID string, seq uint64) string {
	return runID + ":" + strconv.FormatUint(seq, 10)
}

// ParseCursor parses "run_id:seq". The run id must be a valid identifier and
// seq a decimal integer without sign or leading zeros (seq 0 means "before
// the first event").
func ParseCursor(s string) (Cursor, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return Cursor{}, Errorf(CodeBadCursor, "cursor %q: want run_id:seq", Truncate(s, 80))
	}
	runID, num := s[:i], s[i+1:]
	if err := ValidID(runID); err != nil {
		return Cursor{}, Errorf(CodeBadCursor, "cursor run id: %s", err.(*Error).Message)
	}
	if len(num) > 1 && num[0] == '0' {
		return Cursor{}, Errorf(CodeBadCursor, "cursor seq %q has a leading zero", Truncate(num, 24))
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	if err != nil || num[0] == '+' {
		return Cursor{}, Errorf(CodeBadCursor, "cursor seq %q is not a decimal integer", Truncate(num, 24))
	}
	return Cursor{RunID: runID, Seq: seq}, nil
}

// ParseLastEventID reads the Last-Event-ID header of an SSE request for run
// runID and returns the seq to resume after. The id must be a cursor of that
// run (bad_cursor otherwise): an id of another run must never resume this
// one from a foreign position.
func ParseLastEventID(header, runID string) (uint64, error) {
	c, err := ParseCursor(header)
	if err != nil {
		return 0, err
	}
	if c.RunID != runID {
		return 0, Errorf(CodeBadCursor, "Last-Event-ID %s is not of run %s", Truncate(header, 80), Truncate(runID, 80))
	}
	return c.Seq, nil
}

// ValidID reports whether s is usable as a run or session identifier:
// 1..MaxIDLen bytes of [A-Za-z0-9_.-].
func ValidID(s string) error {
	if s == "" {
		return Errorf(CodeBadRequest, "id is empty")
	}
	if len(s) > MaxIDLen {
		return Errorf(CodeTooLarge, "id is longer than %d bytes", MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return Errorf(CodeBadRequest, "id %q has a character outside [A-Za-z0-9_.-]", Truncate(s, 40))
		}
	}
	return nil
}

// Truncate cuts s to at most n bytes, on a rune boundary, marking a cut
// with "…". It is how runhub bounds the text it shows (error messages,
// titles, progress, previews).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
