// Package npmtest installs a directory of pinned npm packages (a
// package.json, its package-lock.json and the scripts beside them) for a
// test that runs official JavaScript clients with node.
package npmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Install copies files from src (package.json and package-lock.json among
// them) into a temporary directory, runs npm ci there and returns node's
// path and the directory. what names the packages in the failure message.
// A missing node or npm fails the test: these tests never skip.
func Install(t testing.TB, what, src string, files ...string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (apt-get install nodejs npm): %s cannot run", what)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not installed (apt-get install npm): %s cannot be installed", what)
	}
	dir = t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return node, dir
}
