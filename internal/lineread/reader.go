package lineread

import (
	"bufio"
	"bytes"
	"io"
)

// A Reader reads the lines of a text/event-stream body, which the SSE
// specification lets end in CRLF, a lone LF or a lone CR (and mix them).
// Unlike Read, which splits at LF only (JSON Lines, where a CR is
// whitespace), it splits at each of the three, and never waits for the byte
// after a CR: a line ending in CR is returned at once, and an LF that then
// follows is skipped as that line's ending. Lines are bounded as Read's
// are. Not safe for concurrent use.
type Reader struct {
	br     *bufio.Reader
	max    int
	skipLF bool // the last line ended in CR: an LF next ends nothing
}

// NewReader reads r through a buffer of size bytes; lines over max bytes
// are reported tooLong.
func NewReader(r io.Reader, size, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// Read reads one line without its line ending. A line over max bytes is
// consumed whole and reported tooLong, with a nil line; no more than max
// bytes of it are kept. err is the reader's error: at the end of the
// stream, io.EOF, returned with what followed the last line ending (an
// empty line when the stream ended with one).
func (r *Reader) Read() (line []byte, tooLong bool, err error) {
	for {
		if _, err = r.br.Peek(1); err != nil {
			if tooLong {
				line = nil
			}
			return line, tooLong, err
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		part := buf
		if i >= 0 {
			part = buf[:i]
		}
		if !tooLong && len(line)+len(part) <= r.max {
			line = append(line, part...)
		} else {
			tooLong, line = true, nil
		}
		if i < 0 {
			_, _ = r.br.Discard(len(buf))
			continue
		}
		r.skipLF = buf[i] == '\r'
		_, _ = r.br.Discard(i + 1)
		if tooLong {
			return nil, true, nil
		}
		if line == nil {
			line = []byte{}
		}
		return line, false, nil
	}
}
