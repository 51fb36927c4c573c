package webhook_test

import (
	"os"
	"sort"
)

func osWriteFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

func sorted(s []string) []string { sort.Strings(s); return s }
