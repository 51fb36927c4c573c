package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakePath is a directory for PATH holding links to the named programs
// (found on the test's PATH) and nothing else.
func fakePath(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			t.Fatalf("%s is not on PATH: the set-up test links the real programs", n)
		}
		if err := os.Symlink(p, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// linkAs links target into dir under name.
func linkAs(t *testing.T, dir, name, target string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// runWithPath runs name args in the repository's root with only PATH (and
// SETUP_NO_INSTALL=1: not root, or no apt) in its environment.
func runWithPath(t *testing.T, path string, name string, args ...string) (string, error) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir(), "SETUP_NO_INSTALL=1"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The README's `make test` on a machine without redis-server, where it
// cannot install (not root, or no apt-get): it stops at once, before go
// vet, with one message naming what is missing and the exact command that
// installs it.
func TestSetupMissingRedisServer(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatal("make is not on PATH")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is not on PATH")
	}
	dir := fakePath(t, "bash", "id", "redis-cli", "nginx", "node", "npm", "apt-get")
	linkAs(t, dir, "go", goBin)
	linkAs(t, dir, "chromium", chromiumPath(t))
	out, err := runWithPath(t, dir, makeBin, "--no-print-directory", "test")
	if err == nil {
		t.Fatalf("make test without redis-server succeeded:\n%s", out)
	}
	if strings.Contains(out, "vet ./...") {
		t.Fatalf("make test went on to go vet without redis-server:\n%s", out)
	}
	for _, want := range []string{"missing redis-server (not on PATH)", "apt-get install -y redis-server\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "make test cannot run") != 1 {
		t.Errorf("want one message:\n%s", out)
	}
}

// Without apt-get the message names the packages for another package
// manager; with a Node.js but no npm it never proposes Debian's npm or
// nodejs, which would conflict with that Node.js.
func TestSetupNeverProposesAConflict(t *testing.T) {
	dir := fakePath(t, "bash", "id", "go", "redis-server", "redis-cli", "node")
	out, err := runWithPath(t, dir, "bash", "scripts/test-prereqs")
	if err == nil {
		t.Fatalf("the check passed without chromium, nginx and npm:\n%s", out)
	}
	for _, want := range []string{"missing chromium nginx npm", "install the packages chromium nginx-light (Debian names)", "npm from the same place as this Node.js"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "nodejs") || strings.Contains(out, "packages chromium nginx-light npm") {
		t.Errorf("the message proposes Debian's nodejs or npm beside an installed Node.js:\n%s", out)
	}
	// Everything there: the check passes silently.
	full := fakePath(t, "bash", "id", "go", "redis-server", "redis-cli", "nginx", "node", "npm")
	linkAs(t, full, "chromium", chromiumPath(t))
	out, err = runWithPath(t, full, "bash", "scripts/test-prereqs")
	if err != nil || out != "" {
		t.Fatalf("with every program: %v\n%s", err, out)
	}
}
