package lineread

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadLine: Read splits any stream (the exec driver's JSONL stdout, an
// SSE body) into exactly its \n-separated lines, without their line
// endings, even when a line spans many buffer fills; it never panics and
// ends at EOF.
func FuzzReadLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"token.delta","payload":{"text":"hi"}}` + "\n" + `{"type":"done"}` + "\n",
		"a\r\nb\n\nc",
		"no newline at all",
		"\n\n",
		"",
		"x\r\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 16) // small: lines span fills
		var got [][]byte
		for {
			line, tooLong, err := Read(br, 1<<20)
			if tooLong {
				t.Fatalf("a line of at most %d bytes reported too long", len(data))
			}
			got = append(got, bytes.Clone(line))
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Read: %v", err)
				}
				break
			}
		}
		want := bytes.Split(data, []byte("\n"))
		if len(got) != len(want) {
			t.Fatalf("%q: %d lines, want %d", data, len(got), len(want))
		}
		for i := range want {
			if w := bytes.TrimRight(want[i], "\r\n"); !bytes.Equal(got[i], w) {
				t.Fatalf("%q: line %d = %q, want %q", data, i, got[i], w)
			}
		}
	})
}

// A line over max is consumed whole and reported tooLong with no text; the
// next line reads as usual.
func TestReadTooLong(t *testing.T) {
	br := bufio.NewReaderSize(bytes.NewReader([]byte("0123456789abcdef\r\nok\r\n")), 16)
	line, tooLong, err := Read(br, 8)
	if err != nil || !tooLong || line != nil {
		t.Fatalf("long line: %q tooLong=%v err=%v, want nil true nil", line, tooLong, err)
	}
	line, tooLong, err = Read(br, 8)
	if err != nil || tooLong || string(line) != "ok" {
		t.Fatalf("next line: %q tooLong=%v err=%v, want \"ok\" false nil", line, tooLong, err)
	}
	if _, _, err = Read(br, 8); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}
