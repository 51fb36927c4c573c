package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The event log is a directory of segment files. A segment is named by the
// global offset of its first byte (16 hex digits, ".seg"); an event is
// addressed by its global offset, so dropping a segment moves no other.
// Only the newest segment is written; the committer appends each batch to
// it with one write and one fdatasync. A segment is mapped read-only
// (mmap, where there is one) and read through the mapping.

// DefaultSegmentBytes is the size past which the log starts a new segment.
const DefaultSegmentBytes = 64 << 20

const segSuffix = ".seg"

// segment is one file of the log.
type segment struct {
	base uint64 // global offset of its first byte
	f    *os.File
	size atomic.Uint64 // bytes written (readers read it, the committer writes it)
	data []byte        // the mapping (len ≥ size), nil where there is no mmap

	// zeroed is the file's length, committer-owned: the active segment's
	// file runs ahead of size with zeros (zeroAhead); every other
	// segment's ends at size.
	zeroed uint64

	// Written by the committer only (open, merge, compaction).
	live      int    // live event records
	liveBytes uint64 // their bytes
}

func (s *segment) end() uint64 { return s.base + s.size.Load() }

// segLog is the event log. The committer writes; readers hold mu shared
// while they read records, so that a segment is neither remapped nor
// dropped under them.
type segLog struct {
	dir      string
	maxBytes uint64
	noSync   bool

	mu   sync.RWMutex
	segs []*segment // ascending by base; the last one is written

	// Committer-owned: bytes of the active segment written by writeLazy
	// and not synced yet, and the number of fdatasyncs of written bytes
	// (for tests).
	dirty bool
	syncs atomic.Int64
	// syncFile flushes a segment: fdatasync (tests slow it down to stand
	// in for a disk).
	syncFile func(*os.File) error
}

// segName is the file name of the segment starting at base.
func segName(base uint64) string { return fmt.Sprintf("%016x%s", base, segSuffix) }

// openLog opens the segments in dir, creating dir and a first segment when
// there are none. It reads nothing: recovery (recover.go) checks the
// records.
func openLog(dir string, maxBytes uint64, noSync bool) (*segLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l := &segLog{dir: dir, maxBytes: maxBytes, noSync: noSync, syncFile: fdatasync}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok || e.IsDir() {
			continue
		}
		base, err := strconv.ParseUint(name, 16, 64)
		if err != nil || len(name) != 16 {
			continue
		}
		seg, err := l.openSegment(base, os.O_RDWR)
		if err != nil {
			l.close()
			return nil, err
		}
		l.segs = append(l.segs, seg)
	}
	slices.SortFunc(l.segs, func(a, b *segment) int { return cmpU64(a.base, b.base) })
	for i := 1; i < len(l.segs); i++ {
		if l.segs[i].base < l.segs[i-1].end() {
			l.close()
			return nil, fmt.Errorf("journal/bolt: segment %s overlaps %s", segName(l.segs[i].base), segName(l.segs[i-1].base))
		}
	}
	if len(l.segs) == 0 {
		if err := l.roll(0, 0); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// openSegment opens (flag: os.O_RDWR, or with O_CREATE|O_EXCL to create)
// and maps the segment at base.
func (l *segLog) openSegment(base uint64, flag int) (*segment, error) {
	f, err := os.OpenFile(filepath.Join(l.dir, segName(base)), flag, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	seg := &segment{base: base, f: f, zeroed: uint64(st.Size())}
	seg.size.Store(uint64(st.Size())) // recovery cuts a zeroed tail off the last segment
	if err := seg.remap(max(l.maxBytes, seg.size.Load())); err != nil {
		f.Close()
		return nil, err
	}
	return seg, nil
}

// remap maps at least n bytes of the segment.
func (s *segment) remap(n uint64) error {
	if s.data != nil {
		if uint64(len(s.data)) >= n {
			return nil
		}
		if err := unmapFile(s.data); err != nil {
			return err
		}
		s.data = nil
	}
	if n == 0 {
		return nil
	}
	if n > 1<<40 {
		return fmt.Errorf("journal/bolt: segment %s: %d bytes is too large to map", segName(s.base), n)
	}
	data, err := mapFile(s.f, int(n))
	if err != nil {
		return fmt.Errorf("journal/bolt: map segment %s: %w", segName(s.base), err)
	}
	s.data = data
	return nil
}

func (s *segment) close() error {
	var err error
	if s.data != nil {
		err = unmapFile(s.data)
		s.data = nil
	}
	return errors.Join(err, s.f.Close())
}

// bytes returns n bytes of the segment at local offset off, through the
// mapping or, without one, read into a new buffer.
func (s *segment) bytes(off, n uint64) ([]byte, error) {
	if off+n > s.size.Load() || off+n < off {
		return nil, fmt.Errorf("%w: segment %s: %d bytes at %d past its end %d", errRecord, segName(s.base), n, off, s.size.Load())
	}
	if uint64(len(s.data)) >= off+n {
		return s.data[off : off+n : off+n], nil
	}
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, int64(off)); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// record returns the whole record at local offset off.
func (s *segment) record(off uint64) ([]byte, error) {
	h, err := s.bytes(off, recHeader)
	if err != nil {
		return nil, err
	}
	n := uint64(binary.LittleEndian.Uint32(h))
	return s.bytes(off, recHeader+n)
}

// find returns the segment holding global offset off, nil when none does
// (it was dropped). The caller holds l.mu or is the committer.
func (l *segLog) find(off uint64) *segment {
	i, _ := slices.BinarySearchFunc(l.segs, off, func(s *segment, off uint64) int {
		if s.end() <= off {
			return -1
		}
		if s.base > off {
			return 1
		}
		return 0
	})
	if i < len(l.segs) && l.segs[i].base <= off && off < l.segs[i].end() {
		return l.segs[i]
	}
	return nil
}

// body returns the body of the event record at global offset off. It
// aliases the mapping: the caller holds l.mu shared (or is the committer)
// while it uses it.
func (l *segLog) body(off uint64) ([]byte, *segment, error) {
	seg := l.find(off)
	if seg == nil {
		return nil, nil, fmt.Errorf("%w: offset %d is in no segment", errRecord, off)
	}
	rec, err := seg.record(off - seg.base)
	if err != nil {
		return nil, nil, err
	}
	body, _, ok := frame(rec)
	if !ok {
		return nil, nil, fmt.Errorf("%w: at offset %d", errRecord, off)
	}
	return body, seg, nil
}

func (l *segLog) active() *segment { return l.segs[len(l.segs)-1] }

// end is the global offset the next write goes to.
func (l *segLog) end() uint64 { return l.active().end() }

// reserve makes room for n more bytes: it starts a new segment when the
// active one has data and n would take it past maxBytes, and maps enough of
// the active one. It returns the global offset the n bytes will be written
// at.
func (l *segLog) reserve(n uint64) (uint64, error) {
	a := l.active()
	if a.size.Load() > 0 && a.size.Load()+n > l.maxBytes {
		if err := l.roll(a.end(), n); err != nil {
			return 0, err
		}
		a = l.active()
	}
	if a.data != nil && a.size.Load()+n > uint64(len(a.data)) {
		l.mu.Lock()
		err := a.remap(max(l.maxBytes, a.size.Load()+n))
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return a.end(), nil
}

// roll starts a new segment at base, mapped for at least n bytes, and
// makes its name durable. A file of that name can only be what a roll that
// failed left (the log's end is past every segment's records): it is
// emptied. The segment that was active first loses its zeroed tail
// (zeroAhead), durably: only the last segment may end in zeros, which
// recovery cuts.
func (l *segLog) roll(base, n uint64) error {
	if err := l.sync(); err != nil { // later syncs sync the new segment only
		return fmt.Errorf("journal/bolt: new segment: %w", err)
	}
	if len(l.segs) > 0 {
		if err := l.trimZeros(l.active()); err != nil {
			return fmt.Errorf("journal/bolt: new segment: %w", err)
		}
	}
	name := filepath.Join(l.dir, segName(base))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("journal/bolt: new segment: %w", err)
	}
	seg := &segment{base: base, f: f}
	err = seg.remap(max(l.maxBytes, n))
	if err == nil {
		err = l.syncDir()
	}
	if err != nil {
		seg.close()
		os.Remove(name)
		return fmt.Errorf("journal/bolt: new segment: %w", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, seg)
	l.mu.Unlock()
	return nil
}

// trimZeros cuts seg's file back to its records, durably.
func (l *segLog) trimZeros(seg *segment) error {
	if seg.zeroed <= seg.size.Load() {
		return nil
	}
	if err := seg.f.Truncate(int64(seg.size.Load())); err != nil {
		return err
	}
	seg.zeroed = seg.size.Load()
	if l.noSync {
		return nil
	}
	return l.syncFile(seg.f)
}

// zeroChunk is how much zeroAhead adds to the active segment's file at a
// time: the batch that first writes past it flushes it (≈ 1 ms here).
const zeroChunk = 1 << 20

// zeroBuf is what zeroAhead writes.
var zeroBuf = make([]byte, 256<<10)

// zeroAhead makes sure the active segment's file holds zeros past the n
// bytes about to be written at its end, extending it by zeroChunk when
// they would reach past its length. A write that only overwrites bytes
// the file already has changes no file metadata, so its fdatasync flushes
// the data alone instead of committing the file system's journal (the
// inode's new size) as well: on ext4 that is a quarter of the fdatasync's
// CPU and much of its time under load. The zeros are made durable by the
// next fdatasync; a crash leaves a zeroed tail, which recovery cuts (a
// zero length is no record). Best effort: when zeros cannot be written
// the write extends the file itself, as it would without them.
//
// A write of zeroChunk or more gets no zeros: it changes the file's length
// anyway, once for that much data, and zeros past it would be flushed now
// and written over by the next such write (durable streams' large
// appends: a fifth more bytes to the disk).
func (l *segLog) zeroAhead(a *segment, n uint64) {
	need := a.size.Load() + n
	if l.noSync || need <= a.zeroed || n >= zeroChunk {
		return
	}
	end := min(max(need, a.zeroed)+zeroChunk, max(l.maxBytes, need))
	// The n bytes themselves are about to be written: zeros go past them.
	for off := max(a.zeroed, need); off < end; {
		m := min(uint64(len(zeroBuf)), end-off)
		if _, err := a.f.WriteAt(zeroBuf[:m], int64(off)); err != nil {
			return // a full disk: the write says so
		}
		off += m
		a.zeroed = off
	}
}

// write appends parts (one record buffer, or a batch's buffer with the
// durable-stream data it points at between its pieces) to the active
// segment and, unless noSync, fdatasyncs it. On failure it cuts the
// segment back to where it was; an error from that too is returned as a
// wedge: the log holds bytes it must not keep.
func (l *segLog) write(parts ...[]byte) (wedged, err error) {
	return l.writeParts(!l.noSync, parts)
}

// writeLazy appends parts to the active segment without fdatasync: they
// are in the file (a crash of the process loses nothing) and sync makes
// them durable against a crash of the machine.
func (l *segLog) writeLazy(parts ...[]byte) (wedged, err error) {
	wedged, err = l.writeParts(false, parts)
	if err == nil {
		l.dirty = !l.noSync
	}
	return wedged, err
}

func (l *segLog) writeParts(sync bool, parts [][]byte) (wedged, err error) {
	a := l.active()
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	l.zeroAhead(a, uint64(n))
	err = writeAt(a.f, parts, int64(a.size.Load()))
	if err == nil && sync {
		err = l.syncFile(a.f)
	}
	if err != nil {
		return l.cut(a.size.Load()), err
	}
	a.zeroed = max(a.zeroed, a.size.Add(uint64(n)))
	if sync {
		l.dirty = false
		l.syncs.Add(1)
	}
	return nil, nil
}

// sync fdatasyncs what writeLazy wrote, if anything.
func (l *segLog) sync() error {
	if !l.dirty {
		return nil
	}
	if err := l.syncFile(l.active().f); err != nil {
		return fmt.Errorf("journal/bolt: sync the event log: %w", err)
	}
	l.dirty = false
	l.syncs.Add(1)
	return nil
}

// cut truncates the active segment to local size n (a batch that did not
// commit).
func (l *segLog) cut(n uint64) error {
	a := l.active()
	err := a.f.Truncate(int64(n))
	if err == nil && !l.noSync {
		err = l.syncFile(a.f)
	}
	if err != nil {
		return fmt.Errorf("journal/bolt: cut segment %s back to %d: %w", segName(a.base), n, err)
	}
	a.size.Store(n)
	a.zeroed = n
	return nil
}

// drop removes a segment that holds no live record. The active segment is
// never dropped.
func (l *segLog) drop(seg *segment) error {
	if seg == l.active() {
		return nil
	}
	l.mu.Lock()
	l.segs = slices.DeleteFunc(l.segs, func(s *segment) bool { return s == seg })
	l.mu.Unlock()
	err := seg.close()
	if rerr := os.Remove(filepath.Join(l.dir, segName(seg.base))); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// syncDir makes the directory's entries (a new segment's name) durable.
func (l *segLog) syncDir() error {
	if l.noSync {
		return nil
	}
	d, err := os.Open(l.dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

func (l *segLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if len(l.segs) > 0 {
		err = l.trimZeros(l.active()) // a clean close leaves records only
	}
	for _, s := range l.segs {
		err = errors.Join(err, s.close())
	}
	l.segs = nil
	return err
}

// EventsDir is the directory of the event log of the journal file at path:
// beside it, its name with ".events" added. Copy both to copy a journal.
func EventsDir(path string) string { return path + ".events" }

// Files lists the files of the journal at path: the journal file, then its
// event log's segments in order. They are what a backup copies, and what
// a test searching the journal's bytes reads.
func Files(path string) ([]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	segs, err := filepath.Glob(filepath.Join(EventsDir(path), "*"))
	if err != nil {
		return nil, err
	}
	sort.Strings(segs)
	return append([]string{path}, segs...), nil
}
