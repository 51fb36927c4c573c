package hermes

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/runhub/runhub/internal/lineread"
)

// maxLine bounds one SSE line; longer lines are dropped as malformed.
const maxLine = 1 << 20

// item is what the stream reader hands the run: one dispatched frame, or a
// comment (keepalive) that only proves the connection is alive.
type item struct {
	comment bool
	name    string // the frame's event: field, if any
	data    []byte // the frame's data (data: lines joined by \n)
	dropped int    // lines dropped as malformed since the last item
}

// readSSE parses a text/event-stream body (lines ending in CRLF, LF or CR) and sends its frames and comments
// on out until the body ends, it fails or ctx ends. It returns why it
// stopped (io.EOF for a clean end).
func readSSE(ctx context.Context, body io.Reader, out chan<- item) error {
	lr := lineread.NewReader(body, 32<<10, maxLine)
	var name string
	var data bytes.Buffer
	hasData, dropped := false, 0
	send := func(it item) bool {
		it.dropped, dropped = dropped, 0
		select {
		case out <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		line, tooLong, err := lr.Read()
		if err != nil {
			if errors.Is(err, io.EOF) && (tooLong || len(line) > 0) {
				return io.ErrUnexpectedEOF // a frame cut off mid-line
			}
			return err
		}
		switch {
		case tooLong:
			dropped++
		case len(line) == 0: // end of frame
			if hasData {
				if !send(item{name: name, data: bytes.Clone(data.Bytes())}) {
					return ctx.Err()
				}
			}
			name, hasData = "", false
			data.Reset()
		case line[0] == ':':
			if !send(item{comment: true, data: bytes.TrimSpace(line[1:])}) {
				return ctx.Err()
			}
		default:
			field, value, found := bytes.Cut(line, []byte(":"))
			if found && len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
			switch string(field) {
			case "data":
				if hasData {
					data.WriteByte('\n')
				}
				data.Write(value)
				hasData = true
			case "event":
				name = string(value)
			case "id", "retry":
			default:
				dropped++
			}
		}
	}
}
