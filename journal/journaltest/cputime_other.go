//go:build !unix

package journaltest

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
