//go:build unix

package bolt

import (
	"os"
	"syscall"
)

// mapFile maps n bytes of f read-only (shared: the committer's writes to f
// show through). n may exceed the file's size; the bytes past its end are
// never read.
func mapFile(f *os.File, n int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }
