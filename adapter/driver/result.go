package driver

import (
	"strings"
	"unicode/utf8"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// answer is the text of the run's last assistant message (the token.delta
// events of its last message_id), kept for done's result. It keeps at most
// answerKeep bytes: the cap and a margin, so that a secret straddling the
// cap is redacted whole before the text is cut.
type answer struct {
	id   string
	text strings.Builder
	over bool // more text came than was kept
}

const answerKeep = protocol.MaxResultBytes + heldTail

func (a *answer) add(id, text string) {
	if id != a.id {
		a.id, a.over = id, false
		a.text.Reset()
	}
	if room := answerKeep - a.text.Len(); len(text) > room {
		cut := max(room, 0)
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text, a.over = text[:cut], true
	}
	a.text.WriteString(text)
}

// Result is the executor's: the run's final assistant text (the text of its
// last assistant message), redacted, cut to protocol.MaxResultBytes, and
// whether it was cut. Call it after Flush.
func (x *Execution) Result() (string, bool) {
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	s, cut := protocol.CapResult(journal.RedactString(x.answer.text.String()))
	return s, cut || x.answer.over
}
