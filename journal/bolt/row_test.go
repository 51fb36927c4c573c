package bolt

import (
	"bytes"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/runhub/runhub/protocol"
)

func TestRow_RoundTrip(t *testing.T) {
	for _, e := range []protocol.Envelope{
		{RunID: "r1", Seq: 1, SessionID: "s1", Type: protocol.EventTokenDelta, CreatedAt: 1764460800.123456, Payload: []byte(`{"message_id":"m","text":"hi"}`)},
		{RunID: "r.2-x_y", Seq: 1 << 40, SessionID: "s", Type: protocol.EventDone, Terminal: true, Payload: []byte(`{}`)},
		{RunID: "r", Seq: 7, SessionID: "s", Type: "future.type", Payload: nil},
	} {
		e.EventID = e.RunID + ":" + itoa(e.Seq)
		d := rowDecoder{runID: e.RunID}
		got, err := d.decode(e.Seq, appendRow(nil, &e))
		if err != nil {
			t.Fatalf("decode of %+v: %v", e, err)
		}
		if len(e.Payload) == 0 {
			e.Payload = got.Payload[:0:0]
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
		}
	}
}

func TestRow_WrongPlace(t *testing.T) {
	e := protocol.Envelope{RunID: "r1", Seq: 3, SessionID: "s", Type: protocol.EventProgress, Payload: []byte(`{"text":"x"}`)}
	row := appendRow(nil, &e)
	if _, err := (&rowDecoder{runID: "r1"}).decode(4, row); err == nil {
		t.Fatal("a row decoded at another seq")
	}
	if _, err := (&rowDecoder{runID: "r2"}).decode(3, row); err == nil {
		t.Fatal("a row decoded in another run")
	}
}

func TestHead_RoundTrip(t *testing.T) {
	for _, h := range []head{
		{sessionID: "s"},
		{born: 1 << 40, terminal: true, terminalAt: 1764460800.5, terminalType: protocol.EventCancelled, sessionID: "sess-1"},
	} {
		got, err := decodeHead(h.encode())
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip of %+v: %+v, %v", h, got, err)
		}
		if _, err := decodeHead(append(h.encode(), 0)); err == nil {
			t.Fatalf("a head with a byte too many decoded")
		}
	}
	for _, h := range []headV1{
		{sessionID: "s"},
		{lastSeq: 99, terminal: true, terminalAt: 1764460800.5, terminalType: protocol.EventCancelled, sessionID: "sess-1",
			pending: []extent{{seq: 60, pos: 1000, count: 30}, {seq: 90, pos: 5000, count: 10}}},
	} {
		got, err := decodeHeadV1(h.encode())
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip of %+v: %+v, %v", h, got, err)
		}
	}
}

// FuzzRow: no input makes the row decoder panic, and every row it accepts
// re-encodes to a row that decodes to the same event.
func FuzzRow(f *testing.F) {
	e := protocol.Envelope{RunID: "r1", Seq: 5, SessionID: "s1", Type: protocol.EventTokenDelta, Terminal: true,
		CreatedAt: 1.5, Payload: []byte(`{"text":"x"}`)}
	f.Add(appendRow(nil, &e), uint64(5), "r1")
	f.Add([]byte{rowVersion, 0}, uint64(0), "")
	f.Fuzz(func(t *testing.T, row []byte, seq uint64, run string) {
		d := rowDecoder{runID: run}
		got, err := d.decode(seq, row)
		if err != nil {
			return
		}
		canon := appendRow(nil, &got)
		again, err := d.decode(seq, canon)
		if err != nil {
			t.Fatalf("row %x decodes to %+v, whose row %x does not decode: %v", row, got, canon, err)
		}
		if twice := appendRow(nil, &again); !bytes.Equal(twice, canon) {
			t.Fatalf("row %x decodes to %+v, then %+v", row, got, again)
		}
	})
}

// FuzzHead: no input makes the head, first-layout head or index decoders
// panic.
func FuzzHead(f *testing.F) {
	h := headV1{lastSeq: 9, sessionID: "s", pending: []extent{{1, 2, 3}, {4, 9, 6}}}
	f.Add(h.encode())
	f.Add(appendExtents(nil, h.pending))
	h.keys = []headKeyV1{{"k1", 1}, {"run/2", 2}}
	f.Add(h.encode())
	h2 := head{born: 7, sessionID: "s", terminal: true, terminalType: protocol.EventDone}
	f.Add(h2.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeHead(b)
		decodeHeadV1(b)
		decodeExtents(nil, b)
	})
}

// A first-layout head's idempotency keys survive encoding; a head without
// keys encodes as heads did before they were kept there, and those decode.
func TestHeadV1Keys(t *testing.T) {
	h := headV1{lastSeq: 9, sessionID: "s", pending: []extent{{1, 2, 3}}, keys: []headKeyV1{{"k1", 1}, {"r_1/2", 2}, {"", 3}}}
	got, err := decodeHeadV1(h.encode())
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, h)
	}
	old := headV1{lastSeq: 9, sessionID: "s", pending: []extent{{1, 2, 3}}}
	b := old.encode()
	// The format before keys: ... session id, then the extents, last.
	if want := append([]byte("\x01s"), appendExtents(nil, old.pending)...); !bytes.HasSuffix(b, want) {
		t.Fatalf("a head without keys encodes as %x, want it to end with %x", b, want)
	}
	if got, err := decodeHeadV1(b); err != nil || got.keys != nil || got.lastSeq != 9 {
		t.Fatalf("old head decoded %+v, %v", got, err)
	}
	for _, bad := range [][]byte{append(bytes.Clone(b), 0), append(bytes.Clone(b), 1, 5, 'k'), append(bytes.Clone(b), 1, 1, 'k')} {
		if _, err := decodeHeadV1(bad); err == nil {
			t.Errorf("decoded a malformed key section %x", bad)
		}
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// Decoding a few small events allocates about their size, not a 64 KiB
// chunk per decoder (a session list decodes each session's latest run);
// a long run still shares chunks, a few allocations for many events.
func TestRowDecoder_ChunksFitTheRead(t *testing.T) {
	small := func() {
		d := rowDecoder{runID: "r1"}
		for seq := uint64(1); seq <= 3; seq++ {
			e := protocol.Envelope{RunID: "r1", Seq: seq, SessionID: "s", Type: protocol.EventTokenDelta, Payload: []byte(`{"message_id":"m","text":"w0 "}`)}
			if _, err := d.decode(seq, appendRow(nil, &e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 1000
	for range runs {
		small()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4<<10 {
		t.Fatalf("decoding 3 events of 31 bytes allocates %d bytes", per)
	}
	row := appendRow(nil, &protocol.Envelope{RunID: "r1", Seq: 1, SessionID: "s", Type: protocol.EventTokenDelta, Payload: bytes.Repeat([]byte("x"), 100)})
	allocs := testing.AllocsPerRun(10, func() {
		d := rowDecoder{runID: "r1"}
		for range 10000 {
			d.decode(1, row)
		}
	})
	if allocs > 10000+100 { // each event's id is one; the chunks a few more
		t.Fatalf("decoding 10,000 events of 100 bytes: %.0f allocations", allocs)
	}
}
