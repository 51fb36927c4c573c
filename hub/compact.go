package hub

import (
	"encoding/json"

	"github.com/runhub/runhub/protocol"
)

// replayFrame encodes the frame of the next catch-up record of events
// (read from the journal, events[0] being the next seq to send) and says
// how many events it covers. A socket that took compacted catch-up
// (protocol.CapCompactReplay) gets consecutive deltas of one message merged
// into one protocol.Compacted record; any other gets events[0] as it is.
func (c *conn) replayFrame(events []protocol.Envelope, compact bool) ([]byte, int, error) {
	if !compact {
		frame, err := protocol.EncodeEventFrame(&events[0])
		return frame, 1, err
	}
	rec, n := protocol.CompactNext(events)
	if n == 1 {
		frame, err := protocol.EncodeEventFrame(&events[0])
		return frame, 1, err
	}
	b, err := json.Marshal(compactedMessage{Type: protocol.MsgEvent, Event: &rec})
	return b, n, err
}

// compactPageFactor: a socket that takes compacted catch-up reads the
// journal this many ReplayPages at a time. Its records are few and small
// (a page of deltas is one record), so a larger page costs the socket's
// queue nothing and saves a writer round trip per page.
const compactPageFactor = 8

// replayPage is the journal page size of a catch-up read.
func (c *conn) replayPage(compact bool) int {
	if compact {
		return c.cfg.ReplayPage * compactPageFactor
	}
	return c.cfg.ReplayPage
}

// compactedMessage is the event message of a merged record.
type compactedMessage struct {
	Type  string              `json:"type"`
	Event *protocol.Compacted `json:"event"`
}
