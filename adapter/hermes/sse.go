package hermes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
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

// readSSE parses a text/event-stream body and sends its frames and comments
// on out until the body ends, it fails or ctx ends. It returns why it
// stopped (io.EOF for a clean end).
func readSSE(ctx context.Context, body io.Reader, out chan<- item) error {
	br := bufio.NewReaderSize(body, 32<<10)
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
		line, tooLong, err := readLine(br)
		if err != nil {
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

// readLine reads one line without its line ending. A line longer than
// maxLine is consumed and reported tooLong.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) <= maxLine {
			buf = append(buf, chunk...)
		} else {
			tooLong = true
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, true, nil
			}
			return bytes.TrimRight(buf, "\r\n"), false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0 && !tooLong:
			return nil, false, io.ErrUnexpectedEOF // a frame cut off mid-line
		default:
			return nil, false, err
		}
	}
}
