//go:build !unix

package bolt

import "os"

// mapFile maps nothing where mmap is not at hand: segments are then read
// with ReadAt.
func mapFile(*os.File, int) ([]byte, error) { return nil, nil }

func unmapFile([]byte) error { return nil }
