package bolt

import (
	"encoding/binary"
	"fmt"
	"os"

	"go.etcd.io/bbolt"
)

// format returns the layout of the file: formatEndedIndex,
// formatStreamLog, formatSegments or 1 for a file of the first layout
// (events in bbolt's log bucket), which Open migrates. A new file is
// marked formatEndedIndex.
func (s *Store) format() (uint64, error) {
	var f uint64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaFormat); len(v) == 8 {
			f = beU64(v)
			return nil
		}
		if tx.Bucket(bucketLogV1) != nil {
			f = 1
			return nil
		}
		f = formatEndedIndex
		return meta.Put(metaFormat, be64(formatEndedIndex))
	})
	return f, err
}

// migrateChunk is how many bytes of records migrate writes at a time.
const migrateChunk = 1 << 20

// migrate moves a journal of the first layout to the segmented log: every
// run's rows, each with the idempotency key it was stored with, go to a
// new log; then one bbolt transaction writes the new heads, drops the old
// event buckets and marks the file. A crash before that commit leaves the
// file as it was and the next Open starts over (it empties the log
// directory first); after it, the file is of the new layout.
func (s *Store) migrate() error {
	dir := EventsDir(s.db.Path())
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	l, err := openLog(dir, s.opts.segmentBytes, s.opts.NoSync)
	if err != nil {
		return err
	}
	defer l.close()
	return s.db.Update(func(tx *bbolt.Tx) error {
		var buf []byte
		flush := func() error {
			if len(buf) == 0 {
				return nil
			}
			if _, err := l.reserve(uint64(len(buf))); err != nil {
				return err
			}
			if _, err := l.write(buf); err != nil {
				return err
			}
			buf = buf[:0]
			return nil
		}
		heads := tx.Bucket(bucketHeads)
		next := map[string][]byte{}
		err := heads.ForEach(func(k, v []byte) error {
			h, err := decodeHeadV1(v)
			if err != nil {
				return fmt.Errorf("run %q: %w", k, err)
			}
			keys, err := keysV1(tx, string(k), h.keys)
			if err != nil {
				return err
			}
			exts, err := extentsAfter(tx.Bucket(bucketIndexV1), string(k), h.pending, 0, int(min(h.lastSeq, 1<<31)))
			if err != nil {
				return err
			}
			lc := newLogCursor(tx.Bucket(bucketLogV1))
			seq := uint64(1)
			for _, x := range exts {
				var rerr error
				err := lc.scan(x.pos, x.count, func(_ uint64, row []byte) bool {
					r, err := parseRow(row)
					if err != nil || r.seq != seq || string(r.run) != string(k) {
						rerr = fmt.Errorf("run %q seq %d: %w", k, seq, errRow)
						return false
					}
					start := len(buf)
					buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, recEvent)
					buf = binary.AppendUvarint(buf, uint64(len(keys[seq])))
					buf = append(buf, keys[seq]...)
					buf = sealRecord(append(buf, row...), start)
					seq++
					return true
				})
				if err == nil {
					err = rerr
				}
				if err != nil {
					return err
				}
				if len(buf) >= migrateChunk {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if seq-1 != h.lastSeq {
				return fmt.Errorf("run %q: %d events in its index, last seq %d", k, seq-1, h.lastSeq)
			}
			nh := head{terminal: h.terminal, terminalAt: h.terminalAt, terminalType: h.terminalType, sessionID: h.sessionID}
			next[string(k)] = nh.encode()
			return nil
		})
		if err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		for id, v := range next {
			if err := heads.Put([]byte(id), v); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{bucketLogV1, bucketIndexV1, bucketKeysV1} {
			if tx.Bucket(b) != nil {
				if err := tx.DeleteBucket(b); err != nil {
					return err
				}
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaLogEnd, be64(l.end())); err != nil {
			return err
		}
		return meta.Put(metaFormat, be64(formatSegments))
	})
}

// keysV1 returns a first-layout run's idempotency keys by seq: those kept
// in its head and those spilled to its keys bucket.
func keysV1(tx *bbolt.Tx, id string, inHead []headKeyV1) (map[uint64]string, error) {
	out := make(map[uint64]string, len(inHead))
	for _, k := range inHead {
		out[k.seq] = k.key
	}
	kb := tx.Bucket(bucketKeysV1)
	if kb == nil {
		return out, nil
	}
	b := kb.Bucket([]byte(id))
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("journal/bolt: run %q key %q: malformed seq", id, k)
		}
		out[beU64(v)] = string(k)
		return nil
	})
	return out, err
}
