// Package lineread reads bounded lines: the one line reader of the drivers
// that read line-framed upstream output. Read splits at LF (the exec
// driver's JSONL stdout and stderr); a Reader splits at CRLF, LF and CR, as
// an SSE stream may (the OpenAI-compatible and Hermes drivers' streams).
package lineread

import (
	"bufio"
	"bytes"
	"errors"
)

// Read reads one line without its line ending ("\n", "\r\n", trailing
// "\r"s). A line over max bytes is consumed whole and reported tooLong,
// with a nil line; what was read of it is not kept past max bytes. err is
// the reader's error (io.EOF after a last line without "\n", which is
// returned with it).
func Read(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		part, err := br.ReadSlice('\n')
		if !tooLong && len(line)+len(part) <= max {
			line = append(line, part...)
		} else {
			tooLong, line = true, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}
