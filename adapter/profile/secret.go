package profile

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/runhub/runhub/journal"
)

// Secret is a credential. It formats, marshals and logs as [REDACTED]; only
// Reveal gives the value, at the one place it is sent upstream.
type Secret struct{ v string }

// NewSecret wraps a credential.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the credential.
func (s Secret) Reveal() string { return s.v }

// Empty reports whether there is no credential.
func (s Secret) Empty() bool { return s.v == "" }

// redacted is what a Secret shows: the journal's redaction mark.
const redacted = journal.Redacted

func (s Secret) String() string   { return redacted }
func (s Secret) GoString() string { return redacted }

// Format keeps every fmt verb from printing the value.
func (s Secret) Format(f fmt.State, _ rune) { f.Write([]byte(redacted)) }

// MarshalJSON writes [REDACTED].
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// Scrub replaces every occurrence of the credential in text with
// [REDACTED] (for upstream error messages that echo what they were sent).
func (s Secret) Scrub(text string) string {
	if len(s.v) < 4 {
		return text
	}
	return strings.ReplaceAll(text, s.v, redacted)
}
