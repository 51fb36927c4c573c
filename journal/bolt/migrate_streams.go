package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// migrateStreams moves a layout-2 file's durable-stream records from
// bbolt's stream_records bucket (data in bbolt) to the event log, on open,
// after recovery and before the committer starts. It goes a chunk at a
// time, each as a batch does: a marker and the chunk's records written and
// fdatasynced, then one bbolt transaction that points the stream index at
// them, deletes them from stream_records and records the log's end. A
// crash leaves the chunk either not committed (cut on the next open, its
// records still in stream_records) or committed; the next open goes on
// from there. When none is left the bucket goes and the file is marked
// formatStreamLog.
func (s *Store) migrateStreams() error {
	for {
		n, err := s.migrateStreamChunk()
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketStreamRecordsV2) != nil {
			if err := tx.DeleteBucket(bucketStreamRecordsV2); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, be64(formatStreamLog))
	})
}

// migrateStreamChunk moves up to migrateChunk bytes of stream records and
// returns how many records it moved.
func (s *Store) migrateStreamChunk() (int, error) {
	buf := append([]byte(nil), markerRecord...)
	var moved []pendingStream
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketStreamRecordsV2)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(buf) < migrateChunk; k, v = c.Next() {
			name, gen, index, ok := splitRecordKey(k)
			if !ok || len(v) < 12 {
				return fmt.Errorf("journal/bolt: stream record %q: malformed", k)
			}
			rec := journal.StreamRecord{Index: index, End: binary.BigEndian.Uint64(v),
				Count: int(binary.BigEndian.Uint32(v[8:])), Data: v[12:]}
			rel := uint64(len(buf))
			buf = appendStreamRecord(buf, name, gen, rec)
			moved = append(moved, pendingStream{key: bytes.Clone(k), end: rec.End, count: uint32(rec.Count),
				rel: rel, n: uint64(len(buf)) - rel})
		}
		return nil
	})
	if err != nil || len(moved) == 0 {
		return 0, err
	}
	start, err := s.log.reserve(uint64(len(buf)))
	if err != nil {
		return 0, err
	}
	if _, err := s.log.write(buf); err != nil {
		return 0, err
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		ib, err := tx.CreateBucketIfNotExists(bucketStreamIndex)
		if err != nil {
			return err
		}
		old := tx.Bucket(bucketStreamRecordsV2)
		for _, p := range moved {
			ent := streamEntry{end: p.end, count: p.count, off: start + p.rel, n: uint32(p.n)}
			if err := ib.Put(p.key, ent.encode()); err != nil {
				return err
			}
			if err := old.Delete(p.key); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaLogEnd, be64(start+uint64(len(buf))))
	})
	if err != nil {
		return 0, err
	}
	a := s.log.active()
	for _, p := range moved {
		a.live++
		a.liveBytes += p.n
	}
	return len(moved), nil
}

// splitRecordKey splits a stream record key, name, 0, generation, 0,
// be64(index). A generation holds no 0 byte (a name may).
func splitRecordKey(k []byte) (name, gen string, index uint64, ok bool) {
	if len(k) < 10 || k[len(k)-9] != 0 {
		return "", "", 0, false
	}
	index = binary.BigEndian.Uint64(k[len(k)-8:])
	head := k[:len(k)-9]
	i := bytes.LastIndexByte(head, 0)
	if i < 0 {
		return "", "", 0, false
	}
	return string(head[:i]), string(head[i+1:]), index, true
}
