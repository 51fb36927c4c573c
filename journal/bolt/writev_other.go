//go:build !linux

package bolt

import "os"

// writeAt writes parts at off, one after the other.
func writeAt(f *os.File, parts [][]byte, off int64) error {
	for _, p := range parts {
		if _, err := f.WriteAt(p, off); err != nil {
			return err
		}
		off += int64(len(p))
	}
	return nil
}
