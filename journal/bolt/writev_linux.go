package bolt

import (
	"os"

	"golang.org/x/sys/unix"
)

// iovMax bounds the pieces of one pwritev (Linux's IOV_MAX).
const iovMax = 1024

// writeAt writes parts at off, in one pwritev where it can.
func writeAt(f *os.File, parts [][]byte, off int64) error {
	if len(parts) == 1 {
		_, err := f.WriteAt(parts[0], off)
		return err
	}
	fd := int(f.Fd())
	for len(parts) > 0 {
		batch := parts[:min(len(parts), iovMax)]
		n, err := unix.Pwritev(fd, batch, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		off += int64(n)
		// Drop what was written; a short write goes on from there.
		for n > 0 && len(parts) > 0 {
			if n >= len(parts[0]) {
				n -= len(parts[0])
				parts = parts[1:]
			} else {
				parts[0] = parts[0][n:]
				n = 0
			}
		}
	}
	return nil
}
