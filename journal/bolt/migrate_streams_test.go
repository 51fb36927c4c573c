package bolt

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// layout2Streams turns the journal at path (closed) into a layout-2 file
// holding the streams of want in bbolt's stream_records bucket, as that
// layout kept them: each stream's records of 256 KiB.
func layout2Streams(t *testing.T, path string, want map[string]string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		sb, err := tx.CreateBucketIfNotExists(bucketStreams)
		if err != nil {
			return err
		}
		rb, err := tx.CreateBucketIfNotExists(bucketStreamRecordsV2)
		if err != nil {
			return err
		}
		for name, text := range want {
			gen := "gen" + name
			var end, i uint64
			for rest := text; rest != ""; {
				part := rest[:min(len(rest), 256<<10)]
				rest = rest[len(part):]
				i++
				end += uint64(len(part))
				v := binary.BigEndian.AppendUint64(nil, end)
				v = binary.BigEndian.AppendUint32(v, 0)
				if err := rb.Put(recordKey(name, gen, i), append(v, part...)); err != nil {
					return err
				}
			}
			raw, _ := json.Marshal(journal.StreamMeta{Version: 1, Gen: gen, Owner: "o", ContentType: "text/plain",
				Records: i, Bytes: end})
			if err := sb.Put([]byte(name), raw); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaFormat, be64(formatSegments))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func formatOf(t *testing.T, s *Store) (f uint64, legacy bool) {
	t.Helper()
	if err := s.db.View(func(tx *bbolt.Tx) error {
		f = beU64(tx.Bucket(bucketMeta).Get(metaFormat))
		legacy = tx.Bucket(bucketStreamRecordsV2) != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return f, legacy
}

// A layout-2 file's stream data moves to the event log on open, a chunk
// at a time (3 MiB here, so several), and reads back whole; a chunk whose
// bbolt commit a crash prevented (its marked records past the log's end)
// is cut and moved again; the run events are untouched; reopening changes
// nothing.
func TestMigrateStreams_FromLayout2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s := mustOpen(t, path, Options{})
	mustBegin(t, s, "s1", "r1")
	appendTokens(t, s, "s1", "r1", 1, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"small": "hello, world", "big": strings.Repeat("0123456789abcdef", 3<<16)}
	layout2Streams(t, path, want)

	// The crash: a marked chunk of records written past the log's end.
	crashed := copyJournal(t, path, t.TempDir())
	segs := segFiles(t, crashed)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendStreamRecord(append([]byte(nil), markerRecord...), "small", "gensmall", journal.StreamRecord{Index: 1, End: 5, Data: []byte("stale")})
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, p := range []string{path, crashed} {
		for round := range 3 {
			s := mustOpen(t, p, Options{})
			if f, legacy := formatOf(t, s); f != formatEndedIndex || legacy {
				t.Fatalf("%s, open %d: layout %d, stream_records kept %v", p, round+1, f, legacy)
			}
			ss := s.Streams(journal.StreamLimits{})
			for name, text := range want {
				if got := readText(t, ss, name); got != text {
					t.Fatalf("%s, open %d: stream %s reads %d bytes %q…, want %d", p, round+1, name, len(got), got[:min(len(got), 20)], len(text))
				}
			}
			checkRun(t, s, "r1", 5, true)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		db := mustOpen(t, p, Options{})
		n := 0
		db.db.View(func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketStreamIndex).ForEach(func(_, _ []byte) error { n++; return nil })
		})
		db.Close()
		if n != 1+12 {
			t.Fatalf("%s: %d stream index entries, want %d", p, n, 13)
		}
	}
}
