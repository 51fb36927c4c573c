package agui

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"github.com/runhub/runhub/internal/lineread"
)

// maxFrame bounds one SSE frame (its data lines together), as
// @ag-ui/client bounds its SSE buffer (10 MiB): a longer frame fails the
// stream.
const maxFrame = 10 << 20

// errFrameTooLong is a frame over maxFrame.
var errFrameTooLong = errors.New("an SSE frame is longer than 10 MiB")

// frameReader splits a text/event-stream body into frames the way
// @ag-ui/client's parseSSEStream does: a frame ends at a blank line, its
// data: lines (one leading space dropped) are joined with "\n", every
// other line (event:, id:, retry:, comments) is ignored, and a frame with
// no data line is no event. Lines may end in "\n" or "\r\n". A frame the
// body ends in without its blank line is still a frame (the client parses
// what its buffer holds at the end), reported with cut set.
type frameReader struct {
	br   *bufio.Reader
	data bytes.Buffer
	err  error // the read error that ended the body, once seen
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, 32<<10)}
}

// next returns the next frame's data. At the body's end it returns the
// frame left without its blank line (cut true) if there is one, else the
// read error (io.EOF for a clean end). The data is valid until the next
// call.
func (f *frameReader) next() (data []byte, cut bool, err error) {
	if f.err != nil {
		return nil, false, f.err
	}
	f.data.Reset()
	has := false
	for {
		line, tooLong, rerr := lineread.Read(f.br, maxFrame)
		if tooLong {
			return nil, false, errFrameTooLong
		}
		switch {
		case len(line) == 0 && rerr == nil:
			if has {
				return f.data.Bytes(), false, nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := line[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if has {
				f.data.WriteByte('\n')
			}
			f.data.Write(v)
			has = true
			if f.data.Len() > maxFrame {
				return nil, false, errFrameTooLong
			}
		}
		if rerr != nil {
			f.err = rerr
			if has {
				return f.data.Bytes(), true, nil
			}
			return nil, false, rerr
		}
	}
}
