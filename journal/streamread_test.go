package journal_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/mem"
)

// countedReads counts the bytes a StreamStore's reads return.
type countedReads struct {
	journal.StreamStore
	bytes atomic.Int64
}

func (c *countedReads) StreamRecords(ctx context.Context, name, gen string, from, to uint64) ([]journal.StreamRecord, error) {
	recs, err := c.StreamStore.StreamRecords(ctx, name, gen, from, to)
	for _, r := range recs {
		c.bytes.Add(int64(len(r.Data)))
	}
	return recs, err
}

// A read bounded by maxBytes asks the store for about that much: reading
// a stream of large records a few at a time does not copy the rest of the
// stream on every answer.
func TestReadStream_AsksForWhatItReturns(t *testing.T) {
	store := mem.New(mem.Options{})
	defer store.Close()
	st := &countedReads{StreamStore: store.StreamStore()}
	ss := journal.NewStreams(st, journal.StreamLimits{})
	ctx := context.Background()
	if _, _, err := ss.CreateStream(ctx, "big", journal.StreamCreate{ContentType: "application/octet-stream"}); err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte{7}, 64<<10)
	for range 40 {
		if _, err := ss.AppendStream(ctx, "big", journal.StreamAppend{ContentType: "application/octet-stream", Data: rec}); err != nil {
			t.Fatal(err)
		}
	}
	after, answers := uint64(0), 0
	for after < 40 {
		read, err := ss.ReadStream(ctx, "big", after, 128<<10, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(read.Records) != 2 {
			t.Fatalf("a 128 KiB read of 64 KiB records after %d returned %d records", after, len(read.Records))
		}
		after = read.Records[len(read.Records)-1].Index
		answers++
	}
	if got, returned := st.bytes.Load(), int64(40*len(rec)); got > 2*returned {
		t.Errorf("%d answers returned %d bytes and read %d from the store", answers, returned, got)
	}
}
