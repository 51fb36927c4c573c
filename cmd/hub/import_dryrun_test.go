package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runhub/runhub/journal/bolt"
)

// A dry run into a data directory without a journal creates nothing (it
// reads an empty journal in memory); a dry run on a journal a hub holds
// says that it needs the journal's lock too, and how to do without.
func TestImportCommand_DryRunLock(t *testing.T) {
	dir, _ := stateDir(t)
	data := filepath.Join(t.TempDir(), "fresh")
	var out, errw bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-data", data, "-dry-run"}, &out, &errw); code != 0 ||
		!strings.Contains(out.String(), "would import (dry run, nothing written): 4 (4 new") {
		t.Fatalf("dry run: %d\n%s%s", code, out.String(), errw.String())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the dry run created %s (%v)", data, err)
	}

	held := t.TempDir()
	s, err := bolt.Open(filepath.Join(held, "journal.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out.Reset()
	errw.Reset()
	code := runMain(context.Background(), []string{"import", "hermes-webui", dir, "-data", held, "-dry-run"}, &out, &errw)
	if code != 1 || !strings.Contains(errw.String(), "a dry run reads the journal too") || !strings.Contains(errw.String(), "copy of the data directory") {
		t.Fatalf("dry run on a held journal: %d\n%s%s", code, out.String(), errw.String())
	}
}
