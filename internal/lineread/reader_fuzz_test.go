package lineread

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// splitSSE is the SSE specification's line splitting, written the plain
// way: every CRLF, then every lone CR, becomes LF, and the text is split at
// LF.
func splitSSE(data []byte) [][]byte {
	s := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	s = bytes.ReplaceAll(s, []byte("\r"), []byte("\n"))
	return bytes.Split(s, []byte("\n"))
}

// readAll reads every line of data through a Reader of a 16-byte buffer
// fed one byte per read (so a CR and its LF come in different reads).
func readAll(t *testing.T, data []byte, max int) (lines [][]byte, long int) {
	r := NewReader(iotest.OneByteReader(bytes.NewReader(data)), 16, max)
	for {
		line, tooLong, err := r.Read()
		if tooLong {
			long++
		} else {
			lines = append(lines, bytes.Clone(line))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Read: %v", err)
			}
			return lines, long
		}
	}
}

// FuzzReaderLines: a Reader splits any stream exactly as the SSE
// specification does (CRLF, LF and CR each end a line), whatever the
// buffer fills and read sizes; it never panics and ends at EOF.
func FuzzReaderLines(f *testing.F) {
	for _, s := range []string{
		"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\r\n",
		"\r\n\r\n", "\r\r\n\n", "\n\r", "x\r", "no end", "",
		"a very long line that spans several buffer fills\rshort\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, long := readAll(t, data, 1<<20)
		if long != 0 {
			t.Fatalf("a line of at most %d bytes reported too long", len(data))
		}
		want := splitSSE(data)
		if len(got) != len(want) {
			t.Fatalf("%q: %d lines %q, want %d %q", data, len(got), got, len(want), want)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%q: line %d = %q, want %q", data, i, got[i], want[i])
			}
		}
		// Bounded: with max 8, each line over 8 bytes is one tooLong, the
		// others read the same.
		got, long = readAll(t, data, 8)
		var short [][]byte
		wantLong := 0
		for _, w := range want {
			if len(w) > 8 {
				wantLong++
			} else {
				short = append(short, w)
			}
		}
		if long != wantLong || len(got) != len(short) {
			t.Fatalf("%q max 8: %d lines and %d too long, want %d and %d", data, len(got), long, len(short), wantLong)
		}
		for i := range short {
			if !bytes.Equal(got[i], short[i]) {
				t.Fatalf("%q max 8: line %d = %q, want %q", data, i, got[i], short[i])
			}
		}
	})
}

// A line ending in CR is returned before the next byte arrives: a stream
// that ends its keepalives in CR and then waits is not stalled.
func TestReaderCRDoesNotWait(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 64, 1<<10)
	go func() { _, _ = pw.Write([]byte(": keepalive\r")) }()
	line, _, err := r.Read()
	if err != nil || string(line) != ": keepalive" {
		t.Fatalf("Read = %q, %v; want \": keepalive\"", line, err)
	}
	go func() { _, _ = pw.Write([]byte("\ndata: x\r\n")); _ = pw.Close() }()
	line, _, err = r.Read()
	if err != nil || string(line) != "data: x" {
		t.Fatalf("after CR then LF: %q, %v; want \"data: x\" (the LF ends the CR's line, not a new one)", line, err)
	}
	if line, _, err = r.Read(); !errors.Is(err, io.EOF) || len(line) != 0 {
		t.Fatalf("at the end: %q, %v; want empty, EOF", line, err)
	}
}
